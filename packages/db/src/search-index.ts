// The index full-text search over posts reads (DATAPLANE_SEARCH=fulltext): a GIN index on each
// post's search document (migration 0009). Built concurrently, so a large database adopting
// full-text search keeps indexing and answering while it builds (hours, on a big one); an
// index an interrupted build left invalid is dropped and built again. Until it is valid,
// searches are answered without it, slowly but with the same results.
import { sql } from 'kysely'
import type { Db } from './db.ts'

export const POST_SEARCH_INDEX = 'post_text_search_idx'

export type IndexState = 'valid' | 'building' | 'absent'

/** Whether the post search index exists, and whether Postgres can use it yet. */
export async function postSearchIndexState(db: Db): Promise<IndexState> {
  const { rows } = await sql<{ valid: boolean; ready: boolean }>`
    SELECT i.indisvalid AS valid, i.indisready AS ready
    FROM pg_catalog.pg_index i
    JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = ${db.schema} AND c.relname = ${POST_SEARCH_INDEX}
  `.execute(db.db)
  const row = rows[0]
  if (!row) return 'absent'
  return row.valid ? 'valid' : 'building'
}

/**
 * Builds the post search index unless a valid one exists. `inProgress` says whether another
 * session is building it now (a second dataplane started at the same time): then this one
 * leaves it be. An invalid index no session is building is the rest of an interrupted build.
 * Resolves once the index is valid (or left to the other builder).
 */
export async function buildPostSearchIndex(
  db: Db,
  opts: { concurrently: boolean } = { concurrently: true },
): Promise<'present' | 'built' | 'elsewhere'> {
  const state = await postSearchIndexState(db)
  if (state === 'valid') return 'present'
  const index = sql.id(db.schema, POST_SEARCH_INDEX)
  if (state === 'building') {
    if (await beingBuilt(db)) return 'elsewhere'
    await sql`DROP INDEX CONCURRENTLY IF EXISTS ${index}`.execute(db.db)
  }
  const on = sql`${sql.id(db.schema, 'post')} USING gin (openplane_post_document(text, langs))`
  // Embedded Postgres (one session, small databases) builds it the plain way: there a
  // concurrent build leaves the index invalid.
  const how = opts.concurrently ? sql`CONCURRENTLY` : sql``
  await sql`CREATE INDEX ${how} IF NOT EXISTS ${sql.id(POST_SEARCH_INDEX)} ON ${on}`.execute(db.db)
  return 'built'
}

/** Whether a session is running CREATE INDEX on the post table now. */
async function beingBuilt(db: Db): Promise<boolean> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM pg_catalog.pg_stat_progress_create_index p
    JOIN pg_catalog.pg_class c ON c.oid = p.relid
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = ${db.schema} AND c.relname = 'post'
  `.execute(db.db)
  return (rows[0]?.n ?? 0) > 0
}

// Full-text search over posts (DATAPLANE_SEARCH=fulltext): the document a post is searched by,
// as functions an expression index can use, so the stock's `post` table gains no column. The
// document holds the text's words as written ('simple': any language, exact words) and, where
// the post's first language has a Postgres configuration, their stems without stop words (so
// "running" finds "runs" in an English post). The index itself is built concurrently by the
// running dataplane (search-index.ts): on a large database that takes long, and must not hold
// a migration, nor lock the table against writes.
import { sql, type Kysely } from 'kysely'

/** ISO 639-1 codes → the Postgres text search configuration for them. */
const CONFIGS: Record<string, string> = {
  ar: 'arabic',
  hy: 'armenian',
  eu: 'basque',
  ca: 'catalan',
  da: 'danish',
  nl: 'dutch',
  en: 'english',
  fi: 'finnish',
  fr: 'french',
  de: 'german',
  el: 'greek',
  hi: 'hindi',
  hu: 'hungarian',
  id: 'indonesian',
  ga: 'irish',
  it: 'italian',
  lt: 'lithuanian',
  ne: 'nepali',
  no: 'norwegian',
  nb: 'norwegian',
  nn: 'norwegian',
  pt: 'portuguese',
  ro: 'romanian',
  ru: 'russian',
  sr: 'serbian',
  es: 'spanish',
  sv: 'swedish',
  ta: 'tamil',
  tr: 'turkish',
  yi: 'yiddish',
}

export async function up(db: Kysely<unknown>): Promise<void> {
  const { rows } = await sql<{ schema: string }>`SELECT current_schema() AS schema`.execute(db)
  const schema = rows[0]!.schema
  // Only the configurations this server has (an embedded Postgres may have fewer).
  const { rows: present } = await sql<{
    name: string
  }>`SELECT cfgname AS name FROM pg_catalog.pg_ts_config`.execute(db)
  const have = new Set(present.map((r) => r.name))
  const cases = Object.entries(CONFIGS)
    .filter(([, config]) => have.has(config))
    .map(([code, config]) => `WHEN '${code}' THEN '${config}'`)
    .join(' ')
  // Qualified by schema inside the bodies: an expression index is also evaluated by autovacuum,
  // whose search_path does not hold this schema.
  await sql
    .raw(
      `CREATE OR REPLACE FUNCTION "${schema}".openplane_search_config(langs jsonb)
      RETURNS regconfig LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
        SELECT (CASE lower(split_part(
          CASE WHEN jsonb_typeof(langs) = 'array' THEN coalesce(langs->>0, '') ELSE '' END,
          '-', 1)) ${cases} ELSE 'simple' END)::regconfig
      $$`,
    )
    .execute(db)
  await sql
    .raw(
      `CREATE OR REPLACE FUNCTION "${schema}".openplane_post_document(body text, langs jsonb)
      RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
        SELECT CASE WHEN c = 'simple'::regconfig THEN to_tsvector(c, coalesce(body, ''))
          ELSE to_tsvector('simple'::regconfig, coalesce(body, ''))
            || to_tsvector(c, coalesce(body, '')) END
        FROM (SELECT "${schema}".openplane_search_config(langs) AS c) config
      $$`,
    )
    .execute(db)
}

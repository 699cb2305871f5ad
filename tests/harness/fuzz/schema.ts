// Postgres helpers of the fuzzer: one small pool for its own reads, clearing a schema between
// sequences (much cheaper than migrating a fresh one), and the counters recounted from rows.
import pg from 'pg'
import { PG_URL } from '../env.ts'

let pool: pg.Pool | undefined
export const fuzzPool = (): pg.Pool => (pool ??= new pg.Pool({ connectionString: PG_URL, max: 4 }))
export async function closeFuzzPool(): Promise<void> {
  await pool?.end()
  pool = undefined
}

const tablesOf = new Map<string, string[]>()

/** Deletes every row of the schema's tables, migrations' bookkeeping aside. */
export async function clearSchema(schema: string): Promise<void> {
  let tables = tablesOf.get(schema)
  if (!tables) {
    const { rows } = await fuzzPool().query<{ table_name: string }>(
      `select table_name from information_schema.tables
       where table_schema = $1 and table_type = 'BASE TABLE' and table_name not like 'kysely_%'`,
      [schema],
    )
    tables = rows.map((r) => r.table_name)
    tablesOf.set(schema, tables)
  }
  await fuzzPool().query(tables.map((t) => `delete from "${schema}"."${t}";`).join('\n'))
}

/**
 * The counters as the rows say they should be, for every key the schema's aggregate tables
 * hold. The rule (docs/testing.md): likes, reposts, quotes by subject uri; replies by parent,
 * leaving out thread-gate violators; follows both ways; posts by creator. Bookmarks come from
 * bsync, not the indexer, and are taken as stored.
 */
export const RECOUNTED = {
  post_agg: `select a.uri,
      (select count(*) from "S"."like" l where l.subject = a.uri)::int as "likeCount",
      (select count(*) from "S".post p where p."replyParent" = a.uri
         and p."violatesThreadGate" is not true)::int as "replyCount",
      (select count(*) from "S".repost r where r.subject = a.uri)::int as "repostCount",
      (select count(*) from "S".quote q where q.subject = a.uri)::int as "quoteCount",
      a."bookmarkCount"::int as "bookmarkCount"
    from "S".post_agg a`,
  profile_agg: `select a.did,
      (select count(*) from "S".follow f where f."subjectDid" = a.did)::int as "followersCount",
      (select count(*) from "S".follow f where f.creator = a.did)::int as "followsCount",
      (select count(*) from "S".post p where p.creator = a.did)::int as "postsCount"
    from "S".profile_agg a`,
} as const

export const STORED = {
  post_agg: `select uri, "likeCount"::int as "likeCount", "replyCount"::int as "replyCount",
      "repostCount"::int as "repostCount", "quoteCount"::int as "quoteCount",
      "bookmarkCount"::int as "bookmarkCount" from "S".post_agg`,
  profile_agg: `select did, "followersCount"::int as "followersCount",
      "followsCount"::int as "followsCount", "postsCount"::int as "postsCount"
    from "S".profile_agg`,
} as const

export type AggTable = keyof typeof RECOUNTED

export async function aggRows(
  schema: string,
  table: AggTable,
  how: 'recounted' | 'stored',
): Promise<string[]> {
  const q = (how === 'recounted' ? RECOUNTED : STORED)[table].replaceAll('"S"', `"${schema}"`)
  const { rows } = await fuzzPool().query(q)
  return rows.map((r) => JSON.stringify(r)).sort()
}

/** Stored counters that differ from the recount, as readable lines (empty when exact). */
export async function inexactCounters(schema: string): Promise<string[]> {
  const out: string[] = []
  for (const table of ['post_agg', 'profile_agg'] as const) {
    const [stored, recounted] = await Promise.all([
      aggRows(schema, table, 'stored'),
      aggRows(schema, table, 'recounted'),
    ])
    const want = new Set(recounted)
    for (const row of stored) if (!want.has(row)) out.push(`${table} stored ${row}`)
    const have = new Set(stored)
    for (const row of recounted) if (!have.has(row)) out.push(`${table} recount ${row}`)
  }
  return out
}

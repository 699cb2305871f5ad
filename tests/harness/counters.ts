// The counter rule (docs/testing.md): openplane's counters always equal the rows they count;
// the stock's are compared after recounting them from its own rows, since it leaves them stale
// where rows go without a recount (an account deletion, the quotes of a deleted post).
import pg from 'pg'
import { PG_URL } from './env.ts'

/**
 * Each counter as a count over rows, for the key of aggregate row `a`: likes, reposts and quotes
 * by subject uri; replies by parent, leaving out thread-gate violators; follows both ways; posts
 * by creator. (Bookmarks come from bsync, not the indexer: taken as stored.)
 */
const COUNTS = {
  post_agg: {
    key: 'uri',
    columns: {
      likeCount: `select count(*) from "S"."like" l where l.subject = a.uri`,
      replyCount: `select count(*) from "S".post p where p."replyParent" = a.uri
        and p."violatesThreadGate" is not true`,
      repostCount: `select count(*) from "S".repost r where r.subject = a.uri`,
      quoteCount: `select count(*) from "S".quote q where q.subject = a.uri`,
    },
    asStored: ['bookmarkCount'],
  },
  profile_agg: {
    key: 'did',
    columns: {
      followersCount: `select count(*) from "S".follow f where f."subjectDid" = a.did`,
      followsCount: `select count(*) from "S".follow f where f.creator = a.did`,
      postsCount: `select count(*) from "S".post p where p.creator = a.did`,
    },
    asStored: [],
  },
} as const

export type AggTable = keyof typeof COUNTS

const inSchema = (q: string, schema: string) => q.replaceAll('"S"', `"${schema}"`)

function select(table: AggTable, how: 'recounted' | 'stored'): string {
  const { key, columns, asStored } = COUNTS[table]
  const cols = [
    ...Object.entries(columns).map(([col, count]) =>
      how === 'recounted' ? `(${count})::int as "${col}"` : `a."${col}"::int as "${col}"`,
    ),
    ...asStored.map((col) => `a."${col}"::int as "${col}"`),
  ]
  return `select a.${key}, ${cols.join(', ')} from "S".${table} a`
}

/** Something that runs a query: a pg client or pool. */
export interface Queryable {
  query(text: string): Promise<{ rows: Record<string, unknown>[] }>
}

/** The aggregate table's rows as sorted JSON lines: as stored, or recounted from the rows. */
export async function aggRows(
  db: Queryable,
  schema: string,
  table: AggTable,
  how: 'recounted' | 'stored',
): Promise<string[]> {
  const { rows } = await db.query(inSchema(select(table, how), schema))
  return rows.map((r) => JSON.stringify(r)).sort()
}

/**
 * Rewrites a schema's counters with their recount, so the stock AppView reading the stock's
 * schema answers counts by the same rule as ours.
 */
export async function recountCounters(db: Queryable, schema: string): Promise<void> {
  for (const table of Object.keys(COUNTS) as AggTable[]) {
    const sets = Object.entries(COUNTS[table].columns).map(
      ([col, count]) => `"${col}" = (${count})`,
    )
    await db.query(inSchema(`update "S".${table} a set ${sets.join(', ')}`, schema))
  }
}

/** recountCounters on its own connection. */
export async function recountSchemaCounters(schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: PG_URL })
  await client.connect()
  try {
    await recountCounters(client, schema)
  } finally {
    await client.end()
  }
}

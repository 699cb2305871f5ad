// How common words are among the posts, from the statistics ANALYZE keeps of the search index's
// document (pg_stats' most common elements with their frequencies: the thousand most frequent
// lexemes here, down to about one post in 1,500; any other is rarer) and the table's row count.
// search-fulltext.ts answers a search for a rare word (a few thousand matches at most) through the
// index over all time at once, and a common one newest first, window by window. Read once per ten minutes per database.
import { sql, type Kysely } from 'kysely'
import { POST_SEARCH_INDEX, type DatabaseSchema } from '@openplane/db'

type Db = Kysely<DatabaseSchema>

const TTL_MS = 10 * 60_000

export interface WordStats {
  /** The most common lexemes, each with the share of posts holding it. */
  frequency: Map<string, number>
  /** Posts in the table, as Postgres last counted them. */
  posts: number
  /** Posts per millisecond of `sortAt` between the oldest and the newest; 0 if unknown. */
  perMs: number
}

const cache = new WeakMap<Db, { at: number; common: Promise<WordStats | undefined> }>()

/** The index's word statistics; undefined while it has none. */
export function commonLexemes(db: Db): Promise<WordStats | undefined> {
  const known = cache.get(db)
  if (known && Date.now() - known.at < TTL_MS) return known.common
  const common = read(db).catch(() => undefined)
  cache.set(db, { at: Date.now(), common })
  return common
}

async function read(db: Db): Promise<WordStats | undefined> {
  const { rows } = await sql<{ elems: string[] | null; freqs: number[] | null; posts: number }>`
    select most_common_elems::text::text[] as elems, most_common_elem_freqs as freqs,
      (select reltuples from pg_class where oid = 'post'::regclass)::float8 as posts
    from pg_stats
    where schemaname = current_schema() and tablename = ${POST_SEARCH_INDEX}
  `.execute(db)
  const { elems, freqs, posts } = rows[0] ?? {}
  if (!elems?.length || !freqs || !posts || posts < 0) return undefined
  // Two probes of the order index: the time the posts span.
  const { rows: span } = await sql<{ oldest: string | null; newest: string | null }>`
    select min("sortAt") as oldest, max("sortAt") as newest from post
  `.execute(db)
  const ms = Date.parse(span[0]?.newest ?? '') - Date.parse(span[0]?.oldest ?? '')
  const perMs = ms > 0 ? posts / ms : 0
  // The frequencies list one per element, then the least and greatest, then nulls' share.
  return { frequency: new Map(elems.map((e, i) => [e, freqs[i]!])), posts, perMs }
}

/**
 * Matches fetched through the index at most for a query to be answered that way: each costs
 * about 3 µs (a word in 1 % of a million posts: 10,000 matches, 29 ms), while window by window a
 * page of a word that common is found in about as much (bench:search: p99 27 ms).
 */
const RARE_MATCHES = 2000

/** Whether a query whose words match about `share` of the posts is rare (see RARE_MATCHES). */
export function rareEnough(share: number, posts: number): boolean {
  return share * posts <= RARE_MATCHES
}

/** The lexemes a tsquery's text names (`'cit' | 'citi' & !'dog'` → cit, citi, dog). */
export function lexemesOf(tsquery: string): string[] {
  return [...tsquery.matchAll(/'((?:[^']|'')*)'/g)].map((m) => m[1]!.replaceAll("''", "'"))
}

// Which words are common among the posts, from the statistics ANALYZE keeps of the search
// index's document (pg_stats' most common elements: the thousand most frequent lexemes here,
// down to about one post in 1,500). A word outside them is rare, and a search for it is best
// answered through the index over all time at once; a common one newest first, window by window
// (search-fulltext.ts). Read once per ten minutes per database.
import { sql, type Kysely } from 'kysely'
import { POST_SEARCH_INDEX, type DatabaseSchema } from '@openplane/db'

type Db = Kysely<DatabaseSchema>

const TTL_MS = 10 * 60_000

const cache = new WeakMap<Db, { at: number; common: Promise<Set<string> | undefined> }>()

/** The index's most common lexemes; undefined while it has no statistics. */
export function commonLexemes(db: Db): Promise<Set<string> | undefined> {
  const known = cache.get(db)
  if (known && Date.now() - known.at < TTL_MS) return known.common
  const common = read(db).catch(() => undefined)
  cache.set(db, { at: Date.now(), common })
  return common
}

async function read(db: Db): Promise<Set<string> | undefined> {
  const { rows } = await sql<{ elems: string[] | null }>`
    select most_common_elems::text::text[] as elems from pg_stats
    where schemaname = current_schema() and tablename = ${POST_SEARCH_INDEX}
  `.execute(db)
  const elems = rows[0]?.elems
  return elems?.length ? new Set(elems) : undefined
}

/** The lexemes a tsquery's text names (`'cit' | 'citi' & !'dog'` → cit, citi, dog). */
export function lexemesOf(tsquery: string): string[] {
  return [...tsquery.matchAll(/'((?:[^']|'')*)'/g)].map((m) => m[1]!.replaceAll("''", "'"))
}

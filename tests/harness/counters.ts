// The counter rule (docs/testing.md): openplane's counters always equal the rows they count;
// the stock's are compared after recounting them from its own rows, since it leaves them stale
// where rows go without a recount.

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
  const q = (how === 'recounted' ? RECOUNTED : STORED)[table].replaceAll('"S"', `"${schema}"`)
  const { rows } = await db.query(q)
  return rows.map((r) => JSON.stringify(r)).sort()
}

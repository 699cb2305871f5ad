// Counts: per-post interaction aggregates, per-actor profile counts, starter pack joins and list
// sizes, all positional; and the number of accounts that joined in a time range.
import type { Timestamp } from '@bufbuild/protobuf'
import { Code, ConnectError } from '@connectrpc/connect'
import { sql } from 'kysely'
import { anyOf } from '@openplane/db'
import type { RouteContext, Routes } from './context.ts'

const WEEK_MS = 7 * 24 * 60 * 60 * 1000
const INT32_MAX = 2 ** 31 - 1

export default (ctx: RouteContext): Routes => ({
  async getInteractionCounts(req) {
    const uris = req.refs.map((ref) => ref.uri)
    if (uris.length === 0) return { likes: [], replies: [], reposts: [], quotes: [] }
    const rows = await ctx.db
      .selectFrom('post_agg')
      .where('uri', '=', anyOf([...new Set(uris)]))
      .selectAll()
      .execute()
    const byUri = new Map(rows.map((row) => [row.uri, row]))
    const count = (pick: (row: (typeof rows)[number]) => number) =>
      uris.map((uri) => {
        const row = byUri.get(uri)
        return row ? pick(row) : 0
      })
    return {
      likes: count((r) => r.likeCount),
      replies: count((r) => r.replyCount),
      reposts: count((r) => r.repostCount),
      quotes: count((r) => r.quoteCount),
      bookmarks: count((r) => r.bookmarkCount),
    }
  },

  // Only actors with a profile_agg row get any counts (their lists, feeds etc. included), which
  // is what the stock answers too.
  async getCountsForUsers(req) {
    if (req.dids.length === 0) return {}
    const ownedBy = (table: 'feed_generator' | 'list' | 'starter_pack' | 'draft') =>
      sql<number>`(select count(*) from ${sql.table(table)} t where t.creator = profile_agg.did)`
    const rows = await ctx.db
      .selectFrom('profile_agg')
      .where('did', '=', anyOf([...new Set(req.dids)]))
      .select([
        'did',
        'followersCount',
        'followsCount',
        'postsCount',
        ownedBy('feed_generator').as('feeds'),
        ownedBy('list').as('lists'),
        ownedBy('starter_pack').as('starterPacks'),
        ownedBy('draft').as('drafts'),
      ])
      .execute()
    const byDid = new Map(rows.map((row) => [row.did, row]))
    const count = (pick: (row: (typeof rows)[number]) => number) =>
      req.dids.map((did) => {
        const row = byDid.get(did)
        return row ? Number(pick(row)) : 0
      })
    return {
      followers: count((r) => r.followersCount),
      following: count((r) => r.followsCount),
      posts: count((r) => r.postsCount),
      lists: count((r) => r.lists),
      feeds: count((r) => r.feeds),
      starterPacks: count((r) => r.starterPacks),
      drafts: count((r) => r.drafts),
    }
  },

  // Profiles that name the pack as the one they joined through: ever, and created this week.
  async getStarterPackCounts(req) {
    const uris = req.refs.map((ref) => ref.uri)
    if (uris.length === 0) return { joinedAllTime: [], joinedWeek: [] }
    const weekAgo = new Date(Date.now() - WEEK_MS).toISOString()
    const rows = await ctx.db
      .selectFrom('profile')
      .where('joinedViaStarterPackUri', '=', anyOf([...new Set(uris)]))
      .select([
        'joinedViaStarterPackUri as uri',
        sql<number>`count(*)`.as('allTime'),
        sql<number>`count(*) filter (where "createdAt" > ${weekAgo})`.as('week'),
      ])
      .groupBy('joinedViaStarterPackUri')
      .execute()
    const byUri = new Map(rows.map((row) => [row.uri, row]))
    return {
      joinedWeek: uris.map((uri) => Number(byUri.get(uri)?.week ?? 0)),
      joinedAllTime: uris.map((uri) => Number(byUri.get(uri)?.allTime ?? 0)),
    }
  },

  async getListCounts(req) {
    const uris = req.refs.map((ref) => ref.uri)
    if (uris.length === 0) return { listItems: [] }
    const rows = await ctx.db
      .selectFrom('list_item')
      .where('listUri', '=', anyOf([...new Set(uris)]))
      .select(['listUri', sql<number>`count(*)`.as('count')])
      .groupBy('listUri')
      .execute()
    const byUri = new Map(rows.map((row) => [row.listUri, Number(row.count)]))
    return { listItems: uris.map((uri) => byUri.get(uri) ?? 0) }
  },

  // The stock leaves this out and the AppView never calls it, so the semantics are ours: the
  // accounts whose profile record's createdAt lies in [start, end). That createdAt is the
  // account's "joined" date the AppView shows (GetActors' created_at); nothing else in the index
  // dates an account: actor.indexedAt moves at every handle re-check, a profile's indexedAt at
  // every edit. So an account without a profile record is not counted. A missing bound leaves
  // that side open; an empty or reversed range counts 0. createdAt is compared as stored text,
  // as the stock compares it for GetStarterPackCounts' week: exact for the millisecond UTC form
  // clients write (`toISOString`); a record written with another UTC offset is placed by its own
  // wall-clock text (off by that offset). No index covers the column: each call scans `profile`.
  async getNewUserCountForRange(req) {
    const start = req.start && isoBound(req.start, 'start')
    const end = req.end && isoBound(req.end, 'end')
    if (start && end && end <= start) return { count: 0 }
    const row = await ctx.db
      .selectFrom('profile')
      .$call((qb) => (start ? qb.where('createdAt', '>=', start) : qb))
      .$call((qb) => (end ? qb.where('createdAt', '<', end) : qb))
      .select(sql<string>`count(*)`.as('count'))
      .executeTakeFirstOrThrow()
    return { count: Math.min(Number(row.count), INT32_MAX) }
  },
})

/**
 * A bound as the ISO text createdAt is stored in. Only years 1 to 9999 have that form (the range
 * a protobuf Timestamp may hold), so anything else is the caller's error.
 */
function isoBound(ts: Timestamp, name: string): string {
  const date = ts.toDate()
  const year = date.getUTCFullYear()
  if (Number.isNaN(date.getTime()) || year < 1 || year > 9999) {
    throw new ConnectError(`${name} is out of range`, Code.InvalidArgument)
  }
  return date.toISOString()
}

import type { RouteContext, Routes } from './context.ts'
import { before, decodeTimeKey, encodeTimeKey, malformedCursor, page } from './util/pagination.ts'
import { pageSize } from './util/stock-cursors.ts'
import { searchFeedGeneratorsSql } from './util/search-sql.ts'

const SUGGESTED_FEEDS_LIMIT = 50

export default (ctx: RouteContext): Routes => ({
  // Ordered and filtered by createdAt while the cursor names sortAt, as in the stock.
  async getActorFeeds(req) {
    const at = decodeTimeKey(req.cursor)
    const limit = pageSize(req.limit)
    const rows = await ctx.db
      .selectFrom('feed_generator')
      .where('feed_generator.creator', '=', req.actorDid)
      .$call((qb) =>
        at ? qb.where(before('feed_generator.createdAt', 'feed_generator.cid', at, true)) : qb,
      )
      .select(['feed_generator.uri', 'feed_generator.cid', 'feed_generator.sortAt'])
      .orderBy('feed_generator.createdAt', 'desc')
      .orderBy('feed_generator.cid', 'desc')
      .limit(limit + 1)
      .execute()
    const { items, cursor } = page(rows, limit, (r) => encodeTimeKey(r.sortAt, r.cid))
    return { uris: items.map((r) => r.uri), cursor }
  },

  // The curated list in its order; the cursor is the last `order` served. A zero limit means
  // the default here, unlike elsewhere.
  async getSuggestedFeeds(req) {
    const after = req.cursor ? parseOrder(req.cursor) : undefined
    const limit = pageSize(req.limit || SUGGESTED_FEEDS_LIMIT)
    const rows = await ctx.db
      .selectFrom('suggested_feed')
      .$call((qb) => (after === undefined ? qb : qb.where('order', '>', after)))
      .select(['uri', 'order'])
      .orderBy('order', 'asc')
      .limit(limit + 1)
      .execute()
    const { items, cursor } = page(rows, limit, (r) => r.order.toString())
    return { uris: items.map((r) => r.uri), cursor }
  },

  // The stock throws here and the AppView never calls it (getFeedGenerator answers isOnline and
  // isValid as true without asking), so the semantics are ours, from what the index knows and
  // without calling the feed service. One status per uri, in order:
  //   ''            no feed generator indexed at that uri (or not a feed generator uri at all);
  //   'takendown'   the record or its creator is taken down (a takedown ref, or the creator's
  //                 host reports it takendown or suspended, which the AppView treats alike);
  //   'deactivated' the creator's account is deactivated at its host;
  //   'valid'       indexed and servable: the AppView would show the generator.
  async getFeedGeneratorStatus(req) {
    const unique = [...new Set(req.uris)]
    if (unique.length === 0) return { status: [] }
    const rows = await ctx.db
      .selectFrom('feed_generator')
      .leftJoin('record', 'record.uri', 'feed_generator.uri')
      .leftJoin('actor', 'actor.did', 'feed_generator.creator')
      .where('feed_generator.uri', 'in', unique)
      .select([
        'feed_generator.uri',
        'record.takedownRef as recordTakedownRef',
        'actor.takedownRef as actorTakedownRef',
        'actor.upstreamStatus',
      ])
      .execute()
    const byUri = new Map(rows.map((row) => [row.uri, feedGeneratorStatus(row)]))
    return { status: req.uris.map((uri) => byUri.get(uri) ?? '') }
  },

  // No cursor in this (V1) response: one page.
  async searchFeedGenerators(req) {
    const { results } = await searchFeedGeneratorsSql(ctx.db, { term: req.query, limit: req.limit })
    return { uris: results }
  },
})

function feedGeneratorStatus(row: {
  recordTakedownRef: string | null
  actorTakedownRef: string | null
  upstreamStatus: string | null
}): string {
  const { recordTakedownRef, actorTakedownRef, upstreamStatus } = row
  if (recordTakedownRef || actorTakedownRef) return 'takendown'
  if (upstreamStatus === 'takendown' || upstreamStatus === 'suspended') return 'takendown'
  if (upstreamStatus === 'deactivated') return 'deactivated'
  return 'valid'
}

/** The stock reads the cursor with parseInt, so a numeric prefix is enough. */
function parseOrder(cursor: string): number {
  const order = Number.parseInt(cursor, 10)
  if (Number.isNaN(order)) throw malformedCursor()
  return order
}

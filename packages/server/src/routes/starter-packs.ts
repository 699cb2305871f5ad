// Starter packs: an actor's packs, newest first.
import type { RouteContext, Routes } from './context.ts'
import { timeKeyDesc } from './util/keyset.ts'
import { pageSize } from './util/stock-cursors.ts'
import { decodeTimeKey, encodeTimeKey, page } from './util/pagination.ts'

export default (ctx: RouteContext): Routes => ({
  async getActorStarterPacks(req) {
    const after = decodeTimeKey(req.cursor)
    const limit = pageSize(req.limit)
    if (!limit) return { uris: [], cursor: '' }
    const query = ctx.db
      .selectFrom('starter_pack')
      .where('starter_pack.creator', '=', req.actorDid)
      .select(['starter_pack.uri', 'starter_pack.cid', 'starter_pack.sortAt'])
    const rows = await timeKeyDesc(query, {
      timeCol: 'starter_pack.sortAt',
      keyCol: 'starter_pack.cid',
      after,
      limit,
    }).execute()
    const { items, cursor } = page(rows, limit, (r) => encodeTimeKey(r.sortAt, r.cid))
    return { uris: items.map((r) => r.uri), cursor }
  },
})

import type { RouteContext, Routes } from './context.ts'
import { before, decodeTimeKey, encodeTimeKey, page } from './util/pagination.ts'
import { pageSize } from './util/stock-cursors.ts'

export default (ctx: RouteContext): Routes => ({
  // A block in either direction (either one when both exist).
  async getBidirectionalBlock(req) {
    const { actorDid, targetDid } = req
    const row = await ctx.db
      .selectFrom('actor_block')
      .where((eb) =>
        eb.or([
          eb.and([eb('creator', '=', actorDid), eb('subjectDid', '=', targetDid)]),
          eb.and([eb('creator', '=', targetDid), eb('subjectDid', '=', actorDid)]),
        ]),
      )
      .select('uri')
      .limit(1)
      .executeTakeFirst()
    return { blockUri: row?.uri ?? '' }
  },

  async getBlocks(req) {
    const at = decodeTimeKey(req.cursor)
    const limit = pageSize(req.limit)
    const rows = await ctx.db
      .selectFrom('actor_block')
      .where('actor_block.creator', '=', req.actorDid)
      .$call((qb) =>
        at ? qb.where(before('actor_block.sortAt', 'actor_block.cid', at, true)) : qb,
      )
      .select(['actor_block.uri', 'actor_block.cid', 'actor_block.sortAt'])
      .orderBy('actor_block.sortAt', 'desc')
      .orderBy('actor_block.cid', 'desc')
      .limit(limit + 1)
      .execute()
    const { items, cursor } = page(rows, limit, (r) => encodeTimeKey(r.sortAt, r.cid))
    return { blockUris: items.map((r) => r.uri), cursor }
  },
})

import type { RouteContext, Routes } from './context.ts'
import { before, decodeTimeKey, encodeTimeKey, page } from './util/pagination.ts'
import { pageSize } from './util/stock-cursors.ts'

export default (ctx: RouteContext): Routes => ({
  // Some block list subscription that puts one actor on the other's block list, either way.
  async getBidirectionalBlockViaList(req) {
    const { actorDid, targetDid } = req
    const row = await ctx.db
      .selectFrom('list_block')
      .innerJoin('list_item', 'list_item.listUri', 'list_block.subjectUri')
      .where((eb) =>
        eb.or([
          eb.and([
            eb('list_block.creator', '=', actorDid),
            eb('list_item.subjectDid', '=', targetDid),
          ]),
          eb.and([
            eb('list_block.creator', '=', targetDid),
            eb('list_item.subjectDid', '=', actorDid),
          ]),
        ]),
      )
      .select('list_block.subjectUri')
      .limit(1)
      .executeTakeFirst()
    return { listUri: row?.subjectUri ?? '' }
  },

  async getBlocklistSubscription(req) {
    const row = await ctx.db
      .selectFrom('list_block')
      .where('creator', '=', req.actorDid)
      .where('subjectUri', '=', req.listUri)
      .select('uri')
      .limit(1)
      .executeTakeFirst()
    return { listblockUri: row?.uri ?? '' }
  },

  // Lists ordered and filtered by the list's createdAt, but, as in the stock, the cursor names
  // the last list's sortAt: the two differ only for lists whose createdAt is after indexing.
  async getBlocklistSubscriptions(req) {
    const at = decodeTimeKey(req.cursor)
    const limit = pageSize(req.limit)
    const rows = await ctx.db
      .selectFrom('list')
      .where(({ exists, selectFrom }) =>
        exists(
          selectFrom('list_block')
            .select('list_block.uri')
            .where('list_block.creator', '=', req.actorDid)
            .whereRef('list_block.subjectUri', '=', 'list.uri'),
        ),
      )
      .$call((qb) => (at ? qb.where(before('list.createdAt', 'list.cid', at, true)) : qb))
      .select(['list.uri', 'list.cid', 'list.sortAt'])
      .orderBy('list.createdAt', 'desc')
      .orderBy('list.cid', 'desc')
      .limit(limit + 1)
      .execute()
    const { items, cursor } = page(rows, limit, (r) => encodeTimeKey(r.sortAt, r.cid))
    return { listUris: items.map((r) => r.uri), cursor }
  },
})

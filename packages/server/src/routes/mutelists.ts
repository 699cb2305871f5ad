import type { RouteContext, Routes } from './context.ts'
import { before, decodeTimeKey, encodeTimeKey, page } from './util/pagination.ts'
import { pageSize } from './util/stock-cursors.ts'

export default (ctx: RouteContext): Routes => ({
  // Some mute list the actor subscribes to that holds the target, if any.
  async getActorMutesActorViaList(req) {
    const row = await ctx.db
      .selectFrom('list_mute')
      .innerJoin('list_item', 'list_item.listUri', 'list_mute.listUri')
      .where('list_mute.mutedByDid', '=', req.actorDid)
      .where('list_item.subjectDid', '=', req.targetDid)
      .select('list_mute.listUri')
      .limit(1)
      .executeTakeFirst()
    return { listUri: row?.listUri ?? '' }
  },

  async getMutelistSubscription(req) {
    const row = await ctx.db
      .selectFrom('list_mute')
      .where('mutedByDid', '=', req.actorDid)
      .where('listUri', '=', req.listUri)
      .select('listUri')
      .limit(1)
      .executeTakeFirst()
    return { subscribed: !!row }
  },

  // Lists ordered and filtered by the list's createdAt, but, as in the stock, the cursor names
  // the last list's sortAt: the two differ only for lists whose createdAt is after indexing.
  async getMutelistSubscriptions(req) {
    const at = decodeTimeKey(req.cursor)
    const limit = pageSize(req.limit)
    const rows = await ctx.db
      .selectFrom('list')
      .where(({ exists, selectFrom }) =>
        exists(
          selectFrom('list_mute')
            .select('list_mute.listUri')
            .where('list_mute.mutedByDid', '=', req.actorDid)
            .whereRef('list_mute.listUri', '=', 'list.uri'),
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

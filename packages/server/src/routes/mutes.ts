import type { RouteContext, Routes } from './context.ts'
import { before, decodeTimeKey, encodeTimeKey, page } from './util/pagination.ts'
import { pageSize } from './util/stock-cursors.ts'

export default (ctx: RouteContext): Routes => ({
  // A mute limited to reposts or quote posts is not a full mute.
  async getActorMutesActor(req) {
    const row = await ctx.db
      .selectFrom('mute')
      .where('mutedByDid', '=', req.actorDid)
      .where('subjectDid', '=', req.targetDid)
      .select(['onlyReposts', 'onlyQuoteposts'])
      .executeTakeFirst()
    return {
      muted: !!row && !row.onlyReposts && !row.onlyQuoteposts,
      mutedOnlyReposts: row?.onlyReposts ?? false,
      mutedOnlyQuoteposts: row?.onlyQuoteposts ?? false,
    }
  },

  // Muted accounts the index knows (joined to actor), newest mute first; the cursor is
  // `<createdAt ms>__<did>`.
  async getMutes(req) {
    const at = decodeTimeKey(req.cursor)
    const limit = pageSize(req.limit)
    const rows = await ctx.db
      .selectFrom('mute')
      .innerJoin('actor', 'actor.did', 'mute.subjectDid')
      .where('mute.mutedByDid', '=', req.actorDid)
      .$call((qb) => (at ? qb.where(before('mute.createdAt', 'mute.subjectDid', at, true)) : qb))
      .select(['actor.did', 'mute.createdAt', 'mute.onlyReposts', 'mute.onlyQuoteposts'])
      .orderBy('mute.createdAt', 'desc')
      .orderBy('mute.subjectDid', 'desc')
      .limit(limit + 1)
      .execute()
    const { items, cursor } = page(rows, limit, (r) => encodeTimeKey(r.createdAt, r.did))
    return {
      dids: items.map((r) => r.did),
      mutes: items.map((r) => ({
        did: r.did,
        onlyReposts: r.onlyReposts,
        onlyQuoteposts: r.onlyQuoteposts,
      })),
      cursor,
    }
  },
})

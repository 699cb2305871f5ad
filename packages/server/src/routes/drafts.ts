import { Timestamp } from '@bufbuild/protobuf'
import type { RouteContext, Routes } from './context.ts'
import { page } from './util/pagination.ts'
import { decodeIsoCursor, encodeIsoCursor, pageSize } from './util/stock-cursors.ts'

export default (ctx: RouteContext): Routes => ({
  // Most recently updated first, paged by updatedAt alone (an ISO cursor), as the stock pages.
  async getActorDrafts(req) {
    const at = decodeIsoCursor(req.cursor)
    const limit = pageSize(req.limit)
    const rows = await ctx.db
      .selectFrom('draft')
      .where('draft.creator', '=', req.actorDid)
      .$call((qb) => (at ? qb.where('draft.updatedAt', '<', at) : qb))
      .select(['draft.key', 'draft.payload', 'draft.createdAt', 'draft.updatedAt'])
      .orderBy('draft.updatedAt', 'desc')
      .limit(limit + 1)
      .execute()
    const { items, cursor } = page(rows, limit, (r) => encodeIsoCursor(r.updatedAt))
    return {
      drafts: items.map((d) => ({
        key: d.key,
        payload: Buffer.from(d.payload),
        createdAt: Timestamp.fromDate(new Date(d.createdAt)),
        updatedAt: Timestamp.fromDate(new Date(d.updatedAt)),
      })),
      cursor,
    }
  },
})

// Quotes: posts quoting a subject, newest first (the subject ref's cid is ignored, as in the stock).
import type { RouteContext, Routes } from './context.ts'
import { timeKeyDesc } from './util/keyset.ts'
import { pageSize } from './util/stock-cursors.ts'
import { decodeTimeKey, encodeTimeKey, page } from './util/pagination.ts'

export default (ctx: RouteContext): Routes => ({
  async getQuotesBySubjectSorted(req) {
    if (!req.subject?.uri) return { uris: [], cursor: '' }
    const after = decodeTimeKey(req.cursor)
    const limit = pageSize(req.limit)
    if (!limit) return { uris: [], cursor: '' }
    const query = ctx.db
      .selectFrom('quote')
      .where('quote.subject', '=', req.subject.uri)
      .select(['quote.uri', 'quote.cid', 'quote.sortAt'])
    const rows = await timeKeyDesc(query, {
      timeCol: 'quote.sortAt',
      keyCol: 'quote.cid',
      after,
      limit,
    }).execute()
    const { items, cursor } = page(rows, limit, (r) => encodeTimeKey(r.sortAt, r.cid))
    return { uris: items.map((r) => r.uri), cursor }
  },
})

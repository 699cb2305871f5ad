// Reposts: reposts of a subject and an actor's reposts (newest first), and which of a batch of
// subjects an actor reposted.
import type { RouteContext, Routes } from './context.ts'
import { timeKeyDesc } from './util/keyset.ts'
import { pageSize } from './util/stock-cursors.ts'
import { decodeTimeKey, encodeTimeKey, page } from './util/pagination.ts'
import { viewerRows } from './util/viewer-state.ts'

export default (ctx: RouteContext): Routes => ({
  async getRepostsBySubject(req) {
    const after = decodeTimeKey(req.cursor)
    const limit = pageSize(req.limit)
    if (!req.subject?.uri || !limit) return { uris: [], cursor: '' }
    const query = ctx.db
      .selectFrom('repost')
      .where('repost.subject', '=', req.subject.uri)
      .select(['repost.uri', 'repost.cid', 'repost.sortAt'])
    const rows = await timeKeyDesc(query, {
      timeCol: 'repost.sortAt',
      keyCol: 'repost.cid',
      after,
      limit,
    }).execute()
    const { items, cursor } = page(rows, limit, (r) => encodeTimeKey(r.sortAt, r.cid))
    return { uris: items.map((r) => r.uri), cursor }
  },

  async getRepostsByActorAndSubjects(req) {
    if (req.refs.length === 0) return { uris: [] }
    const subjects = req.refs.map((ref) => ref.uri)
    const bySubject = await viewerRows(ctx.db, req.actorDid, 'repost', subjects)
    return { uris: subjects.map((uri) => bySubject.get(uri)?.value ?? '') }
  },

  async getActorReposts(req) {
    const after = decodeTimeKey(req.cursor)
    const limit = pageSize(req.limit)
    if (!limit) return { uris: [], cursor: '' }
    const query = ctx.db
      .selectFrom('repost')
      .where('repost.creator', '=', req.actorDid)
      .select(['repost.uri', 'repost.cid', 'repost.sortAt'])
    const rows = await timeKeyDesc(query, {
      timeCol: 'repost.sortAt',
      keyCol: 'repost.cid',
      after,
      limit,
    }).execute()
    const { items, cursor } = page(rows, limit, (r) => encodeTimeKey(r.sortAt, r.cid))
    return { uris: items.map((r) => r.uri), cursor }
  },
})

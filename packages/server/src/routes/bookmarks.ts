// Bookmarks (private, stash-keyed): an actor's bookmarks by key, newest key first, and which of a
// batch of subjects the actor bookmarked.
import { Timestamp } from '@bufbuild/protobuf'
import type { RouteContext, Routes } from './context.ts'
import { decodeKeyCursor, keyDesc } from './util/keyset.ts'
import { pageSize } from './util/stock-cursors.ts'
import { page } from './util/pagination.ts'
import { viewerRows } from './util/viewer-state.ts'

const BOOKMARK_NAMESPACE = 'app.bsky.bookmark.defs#bookmark'

export default (ctx: RouteContext): Routes => ({
  async getActorBookmarks(req) {
    const after = decodeKeyCursor(req.cursor)
    const limit = pageSize(req.limit)
    if (!limit) return { bookmarks: [], cursor: '' }
    const query = ctx.db
      .selectFrom('bookmark')
      .where('bookmark.creator', '=', req.actorDid)
      .select(['bookmark.key', 'bookmark.subjectUri'])
    const rows = await keyDesc(query, { keyCol: 'bookmark.key', after, limit }).execute()
    const { items, cursor } = page(rows, limit, (r) => r.key)
    return { bookmarks: items.map((r) => ({ key: r.key, subject: r.subjectUri })), cursor }
  },

  async getBookmarksByActorAndSubjects(req) {
    const { actorDid, uris } = req
    if (uris.length === 0) return { bookmarks: [] }
    const byUri = await viewerRows(ctx.db, actorDid, 'bookmark', uris)
    const bookmarks = uris.map((uri) => {
      const row = byUri.get(uri)
      if (!row) return { subjectUri: '', subjectCid: '' }
      return {
        ref: { actorDid, namespace: BOOKMARK_NAMESPACE, key: row.value ?? '' },
        subjectUri: row.subject,
        subjectCid: row.cid ?? '',
        indexedAt: Timestamp.fromDate(new Date(row.indexedAt ?? '')),
      }
    })
    return { bookmarks }
  },
})

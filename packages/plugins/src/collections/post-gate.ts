import type { AppBskyFeedPostgate } from '@atproto/api'
import { assertRecord } from '../lexicon.ts'
import type { RecordPlugin } from '../types.ts'
import { AtUri, normalizeDate } from '../util.ts'

type Postgate = AppBskyFeedPostgate.Record

export const postGate: RecordPlugin<Postgate, 'post_gate'> = {
  collection: 'app.bsky.feed.postgate',
  table: 'post_gate',
  parse: (record) => assertRecord<Postgate>('app.bsky.feed.postgate', record),

  async toRow(_db, ref, rec) {
    const post = new AtUri(rec.post)
    // A gate lives beside its post (same repo, same rkey); the stock drops any other outright.
    if (post.host !== ref.did || post.rkey !== ref.rkey) {
      throw new Error('Creator and rkey of post gate does not match its post')
    }
    return {
      uri: ref.uri,
      cid: ref.cid,
      creator: ref.did,
      postUri: rec.post,
      createdAt: normalizeDate(rec.createdAt),
      indexedAt: ref.indexedAt,
    }
  },

  async findDuplicate(db, _ref, rec) {
    const found = await db
      .selectFrom('post_gate')
      .where('postUri', '=', rec.post)
      .select('uri')
      .executeTakeFirst()
    return found?.uri ?? null
  },

  // Quotes indexed earlier keep their violatesEmbeddingRules: the gate only judges later ones.
  onInsert(_db, row) {
    const where = { uri: new AtUri(row.postUri).toString() }
    return { rows: [{ kind: 'update', table: 'post', where, set: { hasPostGate: true } }] }
  },

  onDelete(_db, row) {
    const where = { uri: row.postUri }
    return { rows: [{ kind: 'update', table: 'post', where, set: { hasPostGate: false } }] }
  },
}

import type { AppBskyGraphStarterpack } from '@atproto/api'
import { assertRecord } from '../lexicon.ts'
import type { RecordPlugin } from '../types.ts'
import { normalizeDate } from '../util.ts'

type StarterPack = AppBskyGraphStarterpack.Record

export const starterPack: RecordPlugin<StarterPack, 'starter_pack'> = {
  collection: 'app.bsky.graph.starterpack',
  table: 'starter_pack',
  parse: (record) => assertRecord<StarterPack>('app.bsky.graph.starterpack', record),

  toRow(_db, ref, rec) {
    return {
      uri: ref.uri,
      cid: ref.cid,
      creator: ref.did,
      name: rec.name,
      createdAt: normalizeDate(rec.createdAt),
      indexedAt: ref.indexedAt,
    }
  },

  onInsert: () => ({}),
  onDelete: () => ({}),
}

import type { AppBskyLabelerService } from '@atproto/api'
import { assertRecord } from '../lexicon.ts'
import type { RecordPlugin } from '../types.ts'
import { normalizeDate } from '../util.ts'

type Service = AppBskyLabelerService.Record

export const labeler: RecordPlugin<Service, 'labeler'> = {
  collection: 'app.bsky.labeler.service',
  table: 'labeler',
  parse: (record) => assertRecord<Service>('app.bsky.labeler.service', record),

  toRow(_db, ref, rec) {
    // Only the `self` record declares a labeler; others stay in `record` alone.
    if (ref.rkey !== 'self') return null
    return {
      uri: ref.uri,
      cid: ref.cid,
      creator: ref.did,
      createdAt: normalizeDate(rec.createdAt),
      indexedAt: ref.indexedAt,
    }
  },

  onInsert: () => ({}),
  onDelete: () => ({}),
}

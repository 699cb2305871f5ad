import type { AppBskyGraphBlock } from '@atproto/api'
import { assertRecord } from '../lexicon.ts'
import type { RecordPlugin } from '../types.ts'
import { normalizeDate } from '../util.ts'

type Block = AppBskyGraphBlock.Record

export const block: RecordPlugin<Block, 'actor_block'> = {
  collection: 'app.bsky.graph.block',
  table: 'actor_block',
  parse: (record) => assertRecord<Block>('app.bsky.graph.block', record),

  toRow(_db, ref, rec) {
    return {
      uri: ref.uri,
      cid: ref.cid,
      creator: ref.did,
      subjectDid: rec.subject,
      createdAt: normalizeDate(rec.createdAt),
      indexedAt: ref.indexedAt,
    }
  },

  findDuplicate(db, ref, rec) {
    return db.first('actor_block', { creator: ref.did, subjectDid: rec.subject })?.uri ?? null
  },

  onInsert: () => ({}),
  onDelete: () => ({}),
}

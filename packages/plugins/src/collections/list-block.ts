import type { AppBskyGraphListblock } from '@atproto/api'
import { assertRecord } from '../lexicon.ts'
import type { RecordPlugin } from '../types.ts'
import { normalizeDate } from '../util.ts'

type ListBlock = AppBskyGraphListblock.Record

export const listBlock: RecordPlugin<ListBlock, 'list_block'> = {
  collection: 'app.bsky.graph.listblock',
  table: 'list_block',
  parse: (record) => assertRecord<ListBlock>('app.bsky.graph.listblock', record),

  toRow(_db, ref, rec) {
    return {
      uri: ref.uri,
      cid: ref.cid,
      creator: ref.did,
      subjectUri: rec.subject,
      createdAt: normalizeDate(rec.createdAt),
      indexedAt: ref.indexedAt,
    }
  },

  findDuplicate(db, ref, rec) {
    return db.first('list_block', { creator: ref.did, subjectUri: rec.subject })?.uri ?? null
  },

  onInsert: () => ({}),
  onDelete: () => ({}),
}

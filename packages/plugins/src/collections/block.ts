import type { AppBskyGraphBlock } from '@atproto/api'
import { assertRecord } from '../lexicon.ts'
import type { RecordPlugin } from '../types.ts'
import { normalizeDate } from '../util.ts'

type Block = AppBskyGraphBlock.Record

export const block: RecordPlugin<Block, 'actor_block'> = {
  collection: 'app.bsky.graph.block',
  table: 'actor_block',
  independent: true,
  parse: (record) => assertRecord<Block>('app.bsky.graph.block', record),

  async toRow(_db, ref, rec) {
    return {
      uri: ref.uri,
      cid: ref.cid,
      creator: ref.did,
      subjectDid: rec.subject,
      createdAt: normalizeDate(rec.createdAt),
      indexedAt: ref.indexedAt,
    }
  },

  async findDuplicate(db, ref, rec) {
    const found = await db
      .selectFrom('actor_block')
      .where('creator', '=', ref.did)
      .where('subjectDid', '=', rec.subject)
      .select('uri')
      .executeTakeFirst()
    return found?.uri ?? null
  },

  onInsert: () => ({}),
  onDelete: () => ({}),
}

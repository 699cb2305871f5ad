import type { AppBskyGraphListblock } from '@atproto/api'
import { assertRecord } from '../lexicon.ts'
import type { RecordPlugin } from '../types.ts'
import { normalizeDate } from '../util.ts'

type ListBlock = AppBskyGraphListblock.Record

export const listBlock: RecordPlugin<ListBlock, 'list_block'> = {
  collection: 'app.bsky.graph.listblock',
  table: 'list_block',
  independent: true,
  parse: (record) => assertRecord<ListBlock>('app.bsky.graph.listblock', record),

  async toRow(_db, ref, rec) {
    return {
      uri: ref.uri,
      cid: ref.cid,
      creator: ref.did,
      subjectUri: rec.subject,
      createdAt: normalizeDate(rec.createdAt),
      indexedAt: ref.indexedAt,
    }
  },

  async findDuplicate(db, ref, rec) {
    const found = await db
      .selectFrom('list_block')
      .where('creator', '=', ref.did)
      .where('subjectUri', '=', rec.subject)
      .select('uri')
      .executeTakeFirst()
    return found?.uri ?? null
  },

  onInsert: () => ({}),
  onDelete: () => ({}),
}

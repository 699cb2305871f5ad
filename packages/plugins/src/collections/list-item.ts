import type { AppBskyGraphListitem } from '@atproto/api'
import { assertRecord } from '../lexicon.ts'
import type { RecordPlugin } from '../types.ts'
import { AtUri, normalizeDate } from '../util.ts'

type ListItem = AppBskyGraphListitem.Record

export const listItem: RecordPlugin<ListItem, 'list_item'> = {
  collection: 'app.bsky.graph.listitem',
  table: 'list_item',
  independent: true,
  parse: (record) => assertRecord<ListItem>('app.bsky.graph.listitem', record),

  async toRow(_db, ref, rec) {
    // Only a list's owner may add to it: the stock drops the record outright otherwise.
    if (new AtUri(rec.list).host !== ref.did) {
      throw new Error('Creator of listitem does not match creator of list')
    }
    return {
      uri: ref.uri,
      cid: ref.cid,
      creator: ref.did,
      subjectDid: rec.subject,
      listUri: rec.list,
      createdAt: normalizeDate(rec.createdAt),
      indexedAt: ref.indexedAt,
    }
  },

  async findDuplicate(db, _ref, rec) {
    const found = await db
      .selectFrom('list_item')
      .where('listUri', '=', rec.list)
      .where('subjectDid', '=', rec.subject)
      .select('uri')
      .executeTakeFirst()
    return found?.uri ?? null
  },

  onInsert: () => ({}),
  onDelete: () => ({}),
}

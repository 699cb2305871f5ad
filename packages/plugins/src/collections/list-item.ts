import type { AppBskyGraphListitem } from '@atproto/api'
import { assertRecord, InvalidRecordError } from '../lexicon.ts'
import type { RecordPlugin } from '../types.ts'
import { normalizeDate } from '../util.ts'
import { parseUri } from './common.ts'

type ListItem = AppBskyGraphListitem.Record

export const listItem: RecordPlugin<ListItem, 'list_item'> = {
  collection: 'app.bsky.graph.listitem',
  table: 'list_item',
  parse: (record) => assertRecord<ListItem>('app.bsky.graph.listitem', record),

  // Only a list's owner may add to it: the stock drops the record outright otherwise.
  check(ref, rec) {
    if (parseUri(rec.list, 'list').host !== ref.did) {
      throw new InvalidRecordError('Creator of listitem does not match creator of list')
    }
  },

  toRow(_db, ref, rec) {
    // Also reached by a promoted duplicate, which was checked when it came.
    listItem.check!(ref, rec)
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

  findDuplicate(db, _ref, rec) {
    return db.first('list_item', { listUri: rec.list, subjectDid: rec.subject })?.uri ?? null
  },

  onInsert: () => ({}),
  onDelete: () => ({}),
}

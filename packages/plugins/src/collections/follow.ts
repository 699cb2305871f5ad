import type { AppBskyGraphFollow } from '@atproto/api'
import { assertRecord } from '../lexicon.ts'
import type { RecordPlugin } from '../types.ts'
import { normalizeDate } from '../util.ts'

type Follow = AppBskyGraphFollow.Record

export const follow: RecordPlugin<Follow, 'follow'> = {
  collection: 'app.bsky.graph.follow',
  table: 'follow',
  parse: (record) => assertRecord<Follow>('app.bsky.graph.follow', record),

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
    return db.first('follow', { creator: ref.did, subjectDid: rec.subject })?.uri ?? null
  },

  onInsert(_db, row) {
    return {
      counters: [
        { table: 'profile_agg', key: row.subjectDid, column: 'followersCount', delta: 1 },
        { table: 'profile_agg', key: row.creator, column: 'followsCount', delta: 1 },
      ],
      // The stock notifies even a self-follow.
      notifications: [
        {
          did: row.subjectDid,
          author: row.creator,
          recordUri: row.uri,
          recordCid: row.cid,
          reason: 'follow',
          reasonSubject: null,
          sortAt: row.sortAt,
        },
      ],
    }
  },

  onDelete(_db, row, replacedBy) {
    return {
      counters: [
        { table: 'profile_agg', key: row.subjectDid, column: 'followersCount', delta: -1 },
        { table: 'profile_agg', key: row.creator, column: 'followsCount', delta: -1 },
      ],
      deleteNotificationsFor: replacedBy ? [] : [row.uri],
    }
  },
}

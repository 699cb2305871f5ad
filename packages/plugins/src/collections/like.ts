import type { AppBskyFeedLike } from '@atproto/api'
import { assertRecord } from '../lexicon.ts'
import type { NotificationRow, RecordPlugin } from '../types.ts'
import { didOf, normalizeDate } from '../util.ts'

type Like = AppBskyFeedLike.Record

export const like: RecordPlugin<Like, 'like'> = {
  collection: 'app.bsky.feed.like',
  table: 'like',
  parse: (record) => assertRecord<Like>('app.bsky.feed.like', record),

  toRow(_db, ref, rec) {
    return {
      uri: ref.uri,
      cid: ref.cid,
      creator: ref.did,
      subject: rec.subject.uri,
      subjectCid: rec.subject.cid,
      via: rec.via?.uri ?? null,
      viaCid: rec.via?.cid ?? null,
      createdAt: normalizeDate(rec.createdAt),
      indexedAt: ref.indexedAt,
    }
  },

  findDuplicate(db, ref, rec) {
    return db.first('like', { creator: ref.did, subject: rec.subject.uri })?.uri ?? null
  },

  onInsert(_db, row) {
    const notifications: NotificationRow[] = []
    const subjectAuthor = didOf(row.subject)
    // No notifications to yourself.
    if (subjectAuthor !== row.creator) {
      const base = {
        author: row.creator,
        recordUri: row.uri,
        recordCid: row.cid,
        sortAt: row.sortAt,
      }
      notifications.push({
        ...base,
        did: subjectAuthor,
        reason: 'like',
        reasonSubject: row.subject,
      })
      if (row.via && didOf(row.via) !== row.creator) {
        notifications.push({
          ...base,
          did: didOf(row.via),
          reason: 'like-via-repost',
          reasonSubject: row.via,
        })
      }
    }
    return {
      counters: [{ table: 'post_agg', key: row.subject, column: 'likeCount', delta: 1 }],
      notifications,
    }
  },

  onDelete(_db, row, replacedBy) {
    return {
      counters: [{ table: 'post_agg', key: row.subject, column: 'likeCount', delta: -1 }],
      deleteNotificationsFor: replacedBy ? [] : [row.uri],
    }
  },
}

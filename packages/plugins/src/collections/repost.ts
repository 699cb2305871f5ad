import type { AppBskyFeedRepost } from '@atproto/api'
import { assertRecord } from '../lexicon.ts'
import type { NotificationRow, RecordPlugin } from '../types.ts'
import { AtUri, didOf, normalizeDate, sortAt } from '../util.ts'

type Repost = AppBskyFeedRepost.Record

export const repost: RecordPlugin<Repost, 'repost'> = {
  collection: 'app.bsky.feed.repost',
  table: 'repost',
  parse: (record) => assertRecord<Repost>('app.bsky.feed.repost', record),

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
    return db.first('repost', { creator: ref.did, subject: rec.subject.uri })?.uri ?? null
  },

  onInsert(_db, row) {
    return {
      counters: [{ table: 'post_agg', key: row.subject, column: 'repostCount', delta: 1 }],
      notifications: notificationsFor(row),
    }
  },

  onDelete(_db, row, replacedBy) {
    return {
      counters: [{ table: 'post_agg', key: row.subject, column: 'repostCount', delta: -1 }],
      // A replacement (update, promoted duplicate) keeps the first one's notifications.
      deleteNotificationsFor: replacedBy ? [] : [row.uri],
    }
  },

  // Every repost gets a feed item, duplicates included, as in the stock.
  unconditional: {
    create(ref, rec) {
      const feedItem = {
        type: 'repost' as const,
        uri: ref.uri,
        cid: ref.cid,
        postUri: rec.subject.uri,
        originatorDid: ref.did,
        sortAt: sortAt(normalizeDate(rec.createdAt), ref.indexedAt),
      }
      return [{ kind: 'insert', table: 'feed_item', values: feedItem }]
    },
    delete: (_db, uri) => ({ rows: [{ kind: 'delete', table: 'feed_item', where: { uri } }] }),
  },
}

function notificationsFor(row: {
  uri: string
  cid: string
  creator: string
  subject: string
  via: string | null
  sortAt: string
}): NotificationRow[] {
  const subjectAuthor = didOf(row.subject)
  // No notifications to yourself; reposting your own post notifies nobody at all.
  if (subjectAuthor === row.creator) return []
  const base = { author: row.creator, recordUri: row.uri, recordCid: row.cid, sortAt: row.sortAt }
  const notifs: NotificationRow[] = [
    { ...base, did: subjectAuthor, reason: 'repost', reasonSubject: uriString(row.subject) },
  ]
  if (row.via && didOf(row.via) !== row.creator) {
    notifs.push({
      ...base,
      did: didOf(row.via),
      reason: 'repost-via-repost',
      reasonSubject: uriString(row.via),
    })
  }
  return notifs
}

const uriString = (uri: string) => new AtUri(uri).toString()

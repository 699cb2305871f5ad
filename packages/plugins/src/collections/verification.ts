import type { AppBskyGraphVerification } from '@atproto/api'
import { assertRecord } from '../lexicon.ts'
import type { RecordPlugin } from '../types.ts'
import { normalizeDate } from '../util.ts'

type Verification = AppBskyGraphVerification.Record

export const verification: RecordPlugin<Verification, 'verification'> = {
  collection: 'app.bsky.graph.verification',
  table: 'verification',
  parse: (record) => assertRecord<Verification>('app.bsky.graph.verification', record),

  toRow(_db, ref, rec) {
    return {
      uri: ref.uri,
      cid: ref.cid,
      rkey: ref.rkey,
      creator: ref.did,
      subject: rec.subject,
      handle: rec.handle,
      displayName: rec.displayName,
      createdAt: normalizeDate(rec.createdAt),
      indexedAt: ref.indexedAt,
    }
  },

  findDuplicate(db, ref, rec) {
    return db.first('verification', { subject: rec.subject, creator: ref.did })?.uri ?? null
  },

  onInsert(_db, row) {
    return {
      notifications: [
        {
          did: row.subject,
          author: row.creator,
          recordUri: row.uri,
          recordCid: row.cid,
          reason: 'verified',
          reasonSubject: null,
          sortAt: row.sortedAt,
        },
      ],
    }
  },

  // Every removal tells the subject, even an update or a promoted duplicate; the stock stamps it
  // with the wall clock, and keeps the earlier `verified` notification.
  onDelete(_db, row) {
    return {
      notifications: [
        {
          did: row.subject,
          author: row.creator,
          recordUri: row.uri,
          recordCid: row.cid,
          reason: 'unverified',
          reasonSubject: null,
          sortAt: new Date().toISOString(),
        },
      ],
    }
  },
}

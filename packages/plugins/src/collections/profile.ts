import type { AppBskyActorProfile } from '@atproto/api'
import { assertRecord } from '../lexicon.ts'
import type { RecordPlugin } from '../types.ts'
import { didOf } from '../util.ts'
import { blobCid } from './common.ts'

type Profile = AppBskyActorProfile.Record

export const profile: RecordPlugin<Profile, 'profile'> = {
  collection: 'app.bsky.actor.profile',
  table: 'profile',
  parse: (record) => assertRecord<Profile>('app.bsky.actor.profile', record),

  toRow(_db, ref, rec) {
    // Only `self` is a profile; other rkeys stay in `record` alone.
    if (ref.rkey !== 'self') return null
    return {
      uri: ref.uri,
      cid: ref.cid,
      creator: ref.did,
      displayName: rec.displayName,
      description: rec.description,
      avatarCid: blobCid(rec.avatar),
      bannerCid: blobCid(rec.banner),
      joinedViaStarterPackUri: rec.joinedViaStarterPack?.uri,
      // Unlike other records, kept as written; a profile without one gets the wall clock.
      createdAt: rec.createdAt ?? new Date().toISOString(),
      indexedAt: ref.indexedAt,
    }
  },

  onInsert(_db, row) {
    if (!row.joinedViaStarterPackUri) return {}
    // Only a new profile tells the pack's creator (an update never does), even your own pack.
    return {
      notifications: [
        {
          did: didOf(row.joinedViaStarterPackUri),
          author: row.creator,
          recordUri: row.uri,
          recordCid: row.cid,
          reason: 'starterpack-joined',
          reasonSubject: row.joinedViaStarterPackUri,
          sortAt: row.indexedAt,
        },
      ],
    }
  },

  onDelete: () => ({}),
}

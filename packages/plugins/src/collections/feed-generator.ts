import type { AppBskyFeedGenerator } from '@atproto/api'
import { assertRecord } from '../lexicon.ts'
import type { RecordPlugin } from '../types.ts'
import { normalizeDate } from '../util.ts'
import { blobCid } from './common.ts'

type Generator = AppBskyFeedGenerator.Record

export const feedGenerator: RecordPlugin<Generator, 'feed_generator'> = {
  collection: 'app.bsky.feed.generator',
  table: 'feed_generator',
  parse: (record) => assertRecord<Generator>('app.bsky.feed.generator', record),

  toRow(_db, ref, rec) {
    return {
      uri: ref.uri,
      cid: ref.cid,
      creator: ref.did,
      feedDid: rec.did,
      displayName: rec.displayName,
      description: rec.description,
      descriptionFacets: rec.descriptionFacets ? JSON.stringify(rec.descriptionFacets) : undefined,
      avatarCid: blobCid(rec.avatar),
      createdAt: normalizeDate(rec.createdAt),
      indexedAt: ref.indexedAt,
    }
  },

  onInsert: () => ({}),
  onDelete: () => ({}),
}

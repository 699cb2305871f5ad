import type { AppBskyGraphList } from '@atproto/api'
import { assertRecord } from '../lexicon.ts'
import type { RecordPlugin } from '../types.ts'
import { normalizeDate } from '../util.ts'
import { blobCid } from './common.ts'

type List = AppBskyGraphList.Record

export const list: RecordPlugin<List, 'list'> = {
  collection: 'app.bsky.graph.list',
  table: 'list',
  parse: (record) => assertRecord<List>('app.bsky.graph.list', record),

  toRow(_db, ref, rec) {
    return {
      uri: ref.uri,
      cid: ref.cid,
      creator: ref.did,
      name: rec.name,
      purpose: rec.purpose,
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

import type { AppBskyGraphReferencelistoptout } from '@atproto/api'
import { assertRecord } from '../lexicon.ts'
import type { RecordPlugin } from '../types.ts'
import { AtUri, normalizeDate } from '../util.ts'

type OptOut = AppBskyGraphReferencelistoptout.Record

/** The subject only counts when it is exactly a list uri: did host, list collection, rkey. */
function listSubject(subject: string): string | null {
  try {
    const uri = new AtUri(subject)
    const ok =
      uri.did &&
      uri.rkeySafe &&
      uri.collection === 'app.bsky.graph.list' &&
      uri.pathname.split('/').filter(Boolean).length === 2 &&
      !uri.search &&
      !uri.hash &&
      uri.toString() === subject
    return ok ? uri.toString() : null
  } catch {
    return null
  }
}

export const referenceListOptOut: RecordPlugin<OptOut, 'reference_list_opt_out'> = {
  collection: 'app.bsky.graph.referencelistoptout',
  table: 'reference_list_opt_out',
  parse: (record) => assertRecord<OptOut>('app.bsky.graph.referencelistoptout', record),

  toRow(_db, ref, rec) {
    const subjectUri = listSubject(rec.subject)
    if (!subjectUri) return null
    return {
      uri: ref.uri,
      cid: ref.cid,
      creator: ref.did,
      subjectUri,
      createdAt: normalizeDate(rec.createdAt),
      indexedAt: ref.indexedAt,
    }
  },

  findDuplicate(db, ref, rec) {
    const subjectUri = listSubject(rec.subject)
    if (!subjectUri) return null
    return (
      db.first('reference_list_opt_out', { creator: ref.did, subjectUri: subjectUri })?.uri ?? null
    )
  },

  onInsert: () => ({}),
  onDelete: () => ({}),
  // The stock leaves a duplicate unindexed when the original goes.
  promoteDuplicateOnDelete: false,
}

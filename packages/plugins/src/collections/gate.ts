// Thread gates and post gates share one shape: a record beside its post (same repo and rkey),
// at most one per post, whose presence is mirrored as a flag on the post row.
import { assertRecord, InvalidRecordError } from '../lexicon.ts'
import type { RecordPlugin, RecordRef } from '../types.ts'
import { AtUri, normalizeDate } from '../util.ts'
import { parseUri } from './common.ts'

interface GateRecord {
  post: string
  createdAt: string
}

export function gatePlugin<Rec extends GateRecord, T extends 'thread_gate' | 'post_gate'>(opts: {
  collection: string
  table: T
  /** The post column that says a gate exists. */
  flag: 'hasThreadGate' | 'hasPostGate'
  /** Name in the stock's error message. */
  label: string
}): RecordPlugin<Rec, T> {
  const { collection, table, flag, label } = opts
  // A gate lives beside its post (same repo, same rkey); the stock drops any other outright.
  const check = (ref: RecordRef, rec: Rec) => {
    const post = parseUri(rec.post, `${label} post`)
    if (post.host !== ref.did || post.rkey !== ref.rkey) {
      throw new InvalidRecordError(`Creator and rkey of ${label} does not match its post`)
    }
  }
  return {
    collection,
    table,
    parse: (record) => assertRecord<Rec>(collection, record),

    check,

    toRow(_db, ref, rec) {
      // Also reached by a promoted duplicate, which was checked when it came.
      check(ref, rec)
      return {
        uri: ref.uri,
        cid: ref.cid,
        creator: ref.did,
        postUri: rec.post,
        createdAt: normalizeDate(rec.createdAt),
        indexedAt: ref.indexedAt,
      } as never
    },

    findDuplicate(db, _ref, rec) {
      return db.first(table as 'thread_gate', { postUri: rec.post })?.uri ?? null
    },

    // Posts indexed earlier keep their verdicts (violatesThreadGate / violatesEmbeddingRules):
    // a gate only judges later replies and quotes. The flag is set by every create of a gate,
    // even one whose row already exists (a post indexed after its gate gets it this way).
    unconditional: {
      create: (_ref, rec) => [
        {
          kind: 'update',
          table: 'post',
          where: { uri: new AtUri(rec.post).toString() },
          set: { [flag]: true },
        },
      ],
      delete: () => ({}),
    },

    onInsert: () => ({}),

    onDelete(_db, row) {
      const where = { uri: (row as { postUri: string }).postUri }
      return { rows: [{ kind: 'update', table: 'post', where, set: { [flag]: false } }] }
    },
  }
}

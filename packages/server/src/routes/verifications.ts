// Verifications: the records rpc, and the verifications an actor issued or received, newest first.
// The stock dataplane implements neither list (the AppView reads verifications only through
// GetActors' verifiedBy), so the semantics are ours, chosen to match the stock's other lists:
//   - every indexed `verification` row, whether or not its creator is a trusted verifier (trust
//     is the AppView's call, made on verifiedBy) and whether or not the other party is indexed;
//   - ordered by (sortedAt desc, the other party's did desc); the cursor is the stock's
//     `<sortedAt epoch-ms>__<did>`, as GetMutes pages. The did is unique within either list (the
//     stock keeps one verification per (subject, creator); duplicates wait in duplicate_record),
//     where a cid would not be: two issuers can write byte-identical records;
//   - a zero or negative limit is an empty page, a malformed cursor InvalidArgument.
import { Timestamp } from '@bufbuild/protobuf'
import type { RouteContext, Routes } from './context.ts'
import { timeKeyDesc } from './util/keyset.ts'
import { decodeTimeKey, encodeTimeKey, page } from './util/pagination.ts'
import { recordsOf } from './util/records.ts'
import { pageSize } from './util/stock-cursors.ts'

interface VerificationRow {
  rkey: string
  creator: string
  subject: string
  createdAt: string
  indexedAt: string
  sortedAt: string
}

/** Whose verifications a list holds, and which column names the other party (the page key). */
type Side = { by: 'creator'; key: 'subject' } | { by: 'subject'; key: 'creator' }

export default (ctx: RouteContext): Routes => {
  async function list(side: Side, did: string, limit: number, cursor: string) {
    const after = decodeTimeKey(cursor)
    const size = pageSize(limit)
    if (!size) return { items: [], cursor: '' }
    const query = ctx.db
      .selectFrom('verification')
      .where(`verification.${side.by}`, '=', did)
      .select(['rkey', 'creator', 'subject', 'createdAt', 'indexedAt', 'sortedAt'])
    const rows = await timeKeyDesc(query, {
      timeCol: 'verification.sortedAt',
      keyCol: `verification.${side.key}`,
      after,
      limit: size,
    }).execute()
    return page(rows, size, (r) => encodeTimeKey(r.sortedAt, r[side.key]))
  }

  return {
    getVerificationRecords: recordsOf(ctx.db, 'app.bsky.graph.verification'),

    async getVerificationsIssued(req) {
      const side = { by: 'creator', key: 'subject' } as const
      const { items, cursor } = await list(side, req.actorDid, req.limit, req.cursor)
      return { verifications: items.map(verificationInfo), cursor }
    },

    async getVerificationsReceived(req) {
      const side = { by: 'subject', key: 'creator' } as const
      const { items, cursor } = await list(side, req.subjectDid, req.limit, req.cursor)
      return { verifications: items.map(verificationInfo), cursor }
    },
  }
}

// VerificationIssued and VerificationReceived carry the same fields.
function verificationInfo(row: VerificationRow) {
  return {
    actorDid: row.creator,
    rkey: row.rkey,
    subjectDid: row.subject,
    createdAt: Timestamp.fromDate(new Date(row.createdAt)),
    indexedAt: Timestamp.fromDate(new Date(row.indexedAt)),
    sortedAt: Timestamp.fromDate(new Date(row.sortedAt)),
  }
}

import { describe, expect, it } from 'vitest'
import { MemoryReader, refAt } from '../memory-reader.ts'
import type { Effects } from '../types.ts'
import { labeler } from './labeler.ts'

const ALICE = 'did:plc:alicealicealicealicealic'
const CID = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
const INDEXED = '2026-03-01T12:00:00.000Z'
const URI = `at://${ALICE}/app.bsky.labeler.service/self`

const record = (extra: object = {}) =>
  labeler.parse({
    $type: 'app.bsky.labeler.service',
    policies: { labelValues: ['spam'] },
    createdAt: '2026-03-01T11:00:00.000Z',
    ...extra,
  })
const ref = (uri = URI) => refAt(uri, CID, INDEXED)
/** The row as stored, the generated sortAt added. */
const STORED = {
  uri: URI,
  cid: CID,
  creator: ALICE,
  createdAt: '2026-03-01T11:00:00.000Z',
  indexedAt: INDEXED,
  sortAt: '2026-03-01T11:00:00.000Z',
}
/** Every kind of effect, an absent one as empty, so a stray effect fails the comparison. */
const all = (e: Effects) => ({
  rows: e.rows ?? [],
  counters: e.counters ?? [],
  notifications: e.notifications ?? [],
  deleteNotificationsFor: e.deleteNotificationsFor ?? [],
})
const NONE = { rows: [], counters: [], notifications: [], deleteNotificationsFor: [] }

describe('app.bsky.labeler.service', () => {
  it('refuses a record that is not a labeler service', () => {
    expect(() => labeler.parse({ $type: 'app.bsky.labeler.service', createdAt: INDEXED })).toThrow()
    expect(() => record({ policies: { labelValues: 'spam' } })).toThrow()
    expect(() => record({ createdAt: 'yesterday' })).toThrow()
  })

  it('makes its row from the record, createdAt normalised as the stock stores it', () => {
    // Policies, label definitions and the rest are read from `record`.
    const rec = record({
      reasonTypes: ['com.atproto.moderation.defs#reasonSpam'],
      createdAt: '2026-03-01T12:00:00+01:00',
    })
    expect(labeler.toRow(new MemoryReader(), ref(), rec)).toEqual({
      uri: URI,
      cid: CID,
      creator: ALICE,
      createdAt: '2026-03-01T11:00:00.000Z',
      indexedAt: INDEXED,
    })
  })

  it('keeps a service at another rkey in `record` only', () => {
    const other = `at://${ALICE}/app.bsky.labeler.service/3kother00001`
    const rec = record()
    // Not dropped: the stock still writes its `record` row.
    expect(() => labeler.check?.(ref(other), rec)).not.toThrow()
    expect(labeler.toRow(new MemoryReader(), ref(other), rec)).toBeNull()
  })

  it('has no effects beyond its row, on insert or delete', () => {
    const rec = record()
    const row = STORED
    expect(all(labeler.onInsert(new MemoryReader(), row, ref(), rec))).toEqual(NONE)
    expect(all(labeler.onDelete(new MemoryReader(), row, null))).toEqual(NONE)
    expect(all(labeler.onDelete(new MemoryReader(), row, row, rec))).toEqual(NONE)
  })
})

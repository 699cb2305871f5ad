import { describe, expect, it } from 'vitest'
import { MemoryReader, refAt } from '../memory-reader.ts'
import type { Effects } from '../types.ts'
import { starterPack } from './starter-pack.ts'

const ALICE = 'did:plc:alicealicealicealicealic'
const CID = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
const INDEXED = '2026-03-01T12:00:00.000Z'
const LIST = `at://${ALICE}/app.bsky.graph.list/3klist000001`
const FEED = `at://${ALICE}/app.bsky.feed.generator/cats`
const URI = `at://${ALICE}/app.bsky.graph.starterpack/3kpack000001`

const record = (extra: object = {}) =>
  starterPack.parse({
    $type: 'app.bsky.graph.starterpack',
    name: 'Cat people',
    list: LIST,
    createdAt: '2026-03-01T11:00:00.000Z',
    ...extra,
  })
const ref = (uri = URI) => refAt(uri, CID, INDEXED)
/** The row as stored, the generated sortAt added. */
const STORED = {
  uri: URI,
  cid: CID,
  creator: ALICE,
  name: 'Cat people',
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

describe('app.bsky.graph.starterpack', () => {
  it('refuses a record that is not a starter pack', () => {
    expect(() =>
      starterPack.parse({
        $type: 'app.bsky.graph.starterpack',
        name: 'Cat people',
        createdAt: INDEXED,
      }),
    ).toThrow()
    expect(() => record({ name: '' })).toThrow()
    expect(() => record({ list: 'nope' })).toThrow()
    // Three feeds at most.
    expect(() => record({ feeds: [{ uri: FEED }, { uri: FEED }, { uri: FEED }] })).not.toThrow()
    expect(() => record({ feeds: Array(4).fill({ uri: FEED }) })).toThrow()
    expect(() => record({ createdAt: 'yesterday' })).toThrow()
  })

  it('makes its row from the record, createdAt normalised as the stock stores it', () => {
    const rec = record({
      // The list, description and feeds are read from `record`; the row has the name alone.
      description: 'All about cats',
      feeds: [{ uri: FEED }],
      createdAt: '2026-03-01T12:00:00+01:00',
    })
    expect(starterPack.toRow(new MemoryReader(), ref(), rec)).toEqual({
      uri: URI,
      cid: CID,
      creator: ALICE,
      name: 'Cat people',
      createdAt: '2026-03-01T11:00:00.000Z',
      indexedAt: INDEXED,
    })
  })

  it("has no effects beyond its row: joins are notified by the joiner's profile", () => {
    const rec = record()
    const row = STORED
    expect(all(starterPack.onInsert(new MemoryReader(), row, ref(), rec))).toEqual(NONE)
    expect(all(starterPack.onDelete(new MemoryReader(), row, null))).toEqual(NONE)
    expect(all(starterPack.onDelete(new MemoryReader(), row, row, rec))).toEqual(NONE)
  })
})

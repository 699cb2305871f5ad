import { describe, expect, it } from 'vitest'
import { MemoryReader, refAt } from '../memory-reader.ts'
import { follow } from './follow.ts'

const ALICE = 'did:plc:alicealicealicealicealic'
const BOB = 'did:plc:bobbobbobbobbobbobbobbobb'
const CAROL = 'did:plc:carolcarolcarolcarolcaro'
const CID = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
const INDEXED = '2026-03-01T12:00:00.000Z'
const URI = `at://${ALICE}/app.bsky.graph.follow/3kfollow0001`

const record = (extra: object = {}) =>
  follow.parse({
    $type: 'app.bsky.graph.follow',
    subject: BOB,
    createdAt: '2026-03-01T11:00:00.000Z',
    ...extra,
  })
const ref = (uri = URI) => refAt(uri, CID, INDEXED)
/** The row as stored: the generated sortAt added. */
const stored = (rec = record(), uri = URI) => {
  const row = follow.toRow(new MemoryReader(), ref(uri), rec)!
  return { ...row, sortAt: row.createdAt < INDEXED ? row.createdAt : INDEXED }
}

describe('app.bsky.graph.follow', () => {
  it('refuses a record that is not a follow', () => {
    expect(() => follow.parse({ $type: 'app.bsky.graph.follow', createdAt: INDEXED })).toThrow()
    expect(() =>
      follow.parse({ $type: 'app.bsky.graph.follow', subject: 'bob.test', createdAt: INDEXED }),
    ).toThrow()
    expect(() => follow.parse({ $type: 'app.bsky.graph.follow', subject: BOB })).toThrow()
  })

  it('makes its row from the record, createdAt normalised as the stock stores it', () => {
    // The starter pack a follow came via is not indexed: the stock has no column for it.
    const via = { uri: `at://${CAROL}/app.bsky.graph.starterpack/3kpack`, cid: CID }
    const rec = record({ createdAt: '2026-03-01T06:00:00-05:00', via })
    expect(follow.toRow(new MemoryReader(), ref(), rec)).toEqual({
      uri: URI,
      cid: CID,
      creator: ALICE,
      subjectDid: BOB,
      createdAt: '2026-03-01T11:00:00.000Z',
      indexedAt: INDEXED,
    })
  })

  it('finds the follow that holds its slot: one follow per creator and subject', () => {
    const first = `at://${ALICE}/app.bsky.graph.follow/3kfirst`
    const db = new MemoryReader().put('follow', { uri: first, creator: ALICE, subjectDid: BOB })
    expect(follow.findDuplicate!(db, ref(), record())).toBe(first)
    const others = new MemoryReader().put(
      'follow',
      { uri: `at://${CAROL}/app.bsky.graph.follow/3kfirst`, creator: CAROL, subjectDid: BOB },
      { uri: first, creator: ALICE, subjectDid: CAROL },
    )
    expect(follow.findDuplicate!(others, ref(), record())).toBeNull()
  })

  it("counts the subject's followers and the creator's follows, and notifies the subject", () => {
    const effects = follow.onInsert(new MemoryReader(), stored(), ref(), record())
    expect(effects).toEqual({
      counters: [
        { table: 'profile_agg', key: BOB, column: 'followersCount', delta: 1 },
        { table: 'profile_agg', key: ALICE, column: 'followsCount', delta: 1 },
      ],
      notifications: [
        {
          did: BOB,
          author: ALICE,
          recordUri: URI,
          recordCid: CID,
          reason: 'follow',
          reasonSubject: null,
          sortAt: '2026-03-01T11:00:00.000Z',
        },
      ],
    })
  })

  it('notifies even a follow of yourself, as the stock does', () => {
    const rec = record({ subject: ALICE, createdAt: '2026-03-02T00:00:00.000Z' })
    const effects = follow.onInsert(new MemoryReader(), stored(rec), ref(), rec)
    expect(effects.counters).toEqual([
      { table: 'profile_agg', key: ALICE, column: 'followersCount', delta: 1 },
      { table: 'profile_agg', key: ALICE, column: 'followsCount', delta: 1 },
    ])
    // A createdAt after the index time sorts at the index time.
    expect(effects.notifications?.map((n) => [n.did, n.author, n.sortAt])).toEqual([
      [ALICE, ALICE, INDEXED],
    ])
  })

  it('takes its counts back when deleted, and its notification unless it is replaced', () => {
    const row = stored()
    const counters = [
      { table: 'profile_agg', key: BOB, column: 'followersCount', delta: -1 },
      { table: 'profile_agg', key: ALICE, column: 'followsCount', delta: -1 },
    ]
    expect(follow.onDelete(new MemoryReader(), row, null)).toEqual({
      counters,
      deleteNotificationsFor: [URI],
    })
    expect(follow.onDelete(new MemoryReader(), row, row, record())).toEqual({
      counters,
      deleteNotificationsFor: [],
    })
  })
})

import type { Selectable } from 'kysely'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { MemoryReader, refAt } from '../memory-reader.ts'
import type { Tables } from '../types.ts'
import { verification } from './verification.ts'

const ALICE = 'did:plc:alicealicealicealicealic'
const BOB = 'did:plc:bobbobbobbobbobbobbobbobb'
const CAROL = 'did:plc:carolcarolcarolcarolcaro'
const CID = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
const INDEXED = '2026-03-01T12:00:00.000Z'
const URI = `at://${ALICE}/app.bsky.graph.verification/3kverify0001`

const record = (extra: object = {}) =>
  verification.parse({
    $type: 'app.bsky.graph.verification',
    subject: BOB,
    handle: 'bob.example.com',
    displayName: 'Bob',
    createdAt: '2026-03-01T11:00:00.000Z',
    ...extra,
  })
const ref = (uri = URI) => refAt(uri, CID, INDEXED)
/** The row as stored, the generated sortedAt added. */
const stored = (values: Partial<Selectable<Tables['verification']>> = {}) => ({
  uri: URI,
  cid: CID,
  rkey: '3kverify0001',
  creator: ALICE,
  subject: BOB,
  handle: 'bob.example.com',
  displayName: 'Bob',
  createdAt: '2026-03-01T11:00:00.000Z',
  indexedAt: INDEXED,
  sortedAt: '2026-03-01T11:00:00.000Z',
  ...values,
})

describe('app.bsky.graph.verification', () => {
  afterEach(() => {
    vi.useRealTimers()
  })

  it('refuses a record that is not a verification', () => {
    expect(() =>
      verification.parse({
        $type: 'app.bsky.graph.verification',
        handle: 'bob.example.com',
        displayName: 'Bob',
        createdAt: INDEXED,
      }),
    ).toThrow()
    expect(() => record({ subject: 'bob.example.com' })).toThrow()
    expect(() => record({ handle: 'not a handle' })).toThrow()
    expect(() => record({ displayName: undefined })).toThrow()
    expect(() => record({ createdAt: 'yesterday' })).toThrow()
  })

  it('makes its row from the record, with its rkey, createdAt normalised as the stock stores it', () => {
    const rec = record({ createdAt: '2026-03-01T12:00:00+01:00' })
    expect(verification.toRow(new MemoryReader(), ref(), rec)).toEqual({
      uri: URI,
      cid: CID,
      rkey: '3kverify0001',
      creator: ALICE,
      subject: BOB,
      handle: 'bob.example.com',
      displayName: 'Bob',
      createdAt: '2026-03-01T11:00:00.000Z',
      indexedAt: INDEXED,
    })
  })

  it('finds the verification that holds its slot: one per creator and subject', () => {
    const first = `at://${ALICE}/app.bsky.graph.verification/3kfirst`
    const db = new MemoryReader().put(
      'verification',
      // Another verifier of the same subject, and the same verifier of someone else, ahead of it.
      { uri: `at://${CAROL}/app.bsky.graph.verification/3kc`, creator: CAROL, subject: BOB },
      { uri: `at://${ALICE}/app.bsky.graph.verification/3kx`, creator: ALICE, subject: CAROL },
      { uri: first, creator: ALICE, subject: BOB },
    )
    expect(verification.findDuplicate!(db, ref(), record())).toBe(first)
    const carolVerifiesAlice = `at://${CAROL}/app.bsky.graph.verification/3kverify0002`
    expect(
      verification.findDuplicate!(db, ref(carolVerifiesAlice), record({ subject: ALICE })),
    ).toBeNull()
    expect(verification.findDuplicate!(new MemoryReader(), ref(), record())).toBeNull()
  })

  it("tells the subject it was verified, at the row's sortedAt", () => {
    const rec = record()
    expect(verification.onInsert(new MemoryReader(), stored(), ref(), rec)).toEqual({
      notifications: [
        {
          did: BOB,
          author: ALICE,
          recordUri: URI,
          recordCid: CID,
          reason: 'verified',
          reasonSubject: null,
          sortAt: '2026-03-01T11:00:00.000Z',
        },
      ],
    })
    // A createdAt in the future sorts at the indexing time.
    const later = record({ createdAt: '2026-03-09T00:00:00.000Z' })
    const row = stored({ createdAt: '2026-03-09T00:00:00.000Z', sortedAt: INDEXED })
    const effects = verification.onInsert(new MemoryReader(), row, ref(), later)
    expect(effects.notifications?.map((n) => n.sortAt)).toEqual([INDEXED])
  })

  it('tells the subject when it is removed, at the wall clock, keeping the earlier notification', () => {
    vi.useFakeTimers({ now: new Date('2026-04-02T08:30:00.000Z') })
    const row = stored()
    const unverified = {
      did: BOB,
      author: ALICE,
      recordUri: URI,
      recordCid: CID,
      reason: 'unverified',
      reasonSubject: null,
      sortAt: '2026-04-02T08:30:00.000Z',
    }
    expect(verification.onDelete(new MemoryReader(), row, null)).toEqual({
      notifications: [unverified],
    })
    // An update (or a promoted duplicate) tells it as well, of the row that went.
    const edited = record({ displayName: 'Robert' })
    const replacement = stored({ displayName: 'Robert', indexedAt: '2026-03-02T00:00:00.000Z' })
    expect(verification.onDelete(new MemoryReader(), row, replacement, edited)).toEqual({
      notifications: [unverified],
    })
  })
})

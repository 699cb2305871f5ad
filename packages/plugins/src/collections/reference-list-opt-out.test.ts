import { describe, expect, it } from 'vitest'
import { MemoryReader, refAt } from '../memory-reader.ts'
import { referenceListOptOut as optOut } from './reference-list-opt-out.ts'

const ALICE = 'did:plc:alicealicealicealicealic'
const BOB = 'did:plc:bobbobbobbobbobbobbobbobb'
const CAROL = 'did:plc:carolcarolcarolcarolcaro'
const CID = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
const INDEXED = '2026-03-01T12:00:00.000Z'
const LIST = `at://${BOB}/app.bsky.graph.list/3klist000001`
const URI = `at://${ALICE}/app.bsky.graph.referencelistoptout/3koptout0001`

const record = (extra: object = {}) =>
  optOut.parse({
    $type: 'app.bsky.graph.referencelistoptout',
    subject: LIST,
    createdAt: '2026-03-01T11:00:00.000Z',
    ...extra,
  })
const ref = (uri = URI) => refAt(uri, CID, INDEXED)
/** Subjects that pass the lexicon but are no canonical list uri: the stock indexes none. */
const NOT_LISTS = [
  'at://bob.test/app.bsky.graph.list/3klist000001',
  `at://${BOB}/app.bsky.graph.list`,
  `at://${BOB}/app.bsky.graph.starterpack/3klist000001`,
]

describe('app.bsky.graph.referencelistoptout', () => {
  it('refuses a record that is not an opt-out', () => {
    const base = { $type: 'app.bsky.graph.referencelistoptout', createdAt: INDEXED }
    expect(() => optOut.parse(base)).toThrow()
    expect(() => optOut.parse({ ...base, subject: 'nope' })).toThrow()
    expect(() => optOut.parse({ ...base, subject: `${LIST}#frag` })).toThrow()
    expect(() => optOut.parse({ ...base, subject: LIST, createdAt: 'later' })).toThrow()
  })

  it('makes its row from the record, createdAt normalised as the stock stores it', () => {
    const rec = record({ createdAt: '2026-03-01T11:00:00Z' })
    expect(optOut.toRow(new MemoryReader(), ref(), rec)).toEqual({
      uri: URI,
      cid: CID,
      creator: ALICE,
      subjectUri: LIST,
      createdAt: '2026-03-01T11:00:00.000Z',
      indexedAt: INDEXED,
    })
  })

  it('keeps a record whose subject is no DID-based list uri out of the index', () => {
    for (const subject of NOT_LISTS) {
      expect(optOut.toRow(new MemoryReader(), ref(), record({ subject }))).toBeNull()
    }
  })

  it('finds the opt-out that holds its slot: one per creator and list', () => {
    const first = `at://${ALICE}/app.bsky.graph.referencelistoptout/3kfirst`
    const db = new MemoryReader().put('reference_list_opt_out', {
      uri: first,
      creator: ALICE,
      subjectUri: LIST,
    })
    expect(optOut.findDuplicate!(db, ref(), record())).toBe(first)
    const others = new MemoryReader().put(
      'reference_list_opt_out',
      {
        uri: `at://${CAROL}/app.bsky.graph.referencelistoptout/3kf`,
        creator: CAROL,
        subjectUri: LIST,
      },
      { uri: first, creator: ALICE, subjectUri: `at://${BOB}/app.bsky.graph.list/3kother` },
    )
    expect(optOut.findDuplicate!(others, ref(), record())).toBeNull()
  })

  it('finds no slot for a subject that is no list uri, even one stored as such', () => {
    for (const subject of NOT_LISTS) {
      const db = new MemoryReader().put('reference_list_opt_out', {
        uri: `at://${ALICE}/app.bsky.graph.referencelistoptout/3kfirst`,
        creator: ALICE,
        subjectUri: subject,
      })
      expect(optOut.findDuplicate!(db, ref(), record({ subject }))).toBeNull()
    }
  })

  it('counts nothing and notifies nobody, created or deleted', () => {
    const row = {
      ...optOut.toRow(new MemoryReader(), ref(), record())!,
      sortAt: '2026-03-01T11:00:00.000Z',
    }
    expect(optOut.onInsert(new MemoryReader(), row, ref(), record())).toEqual({})
    expect(optOut.onDelete(new MemoryReader(), row, null)).toEqual({})
  })

  it('leaves a duplicate unindexed when the original is deleted, as the stock does', () => {
    expect(optOut.promoteDuplicateOnDelete).toBe(false)
  })
})

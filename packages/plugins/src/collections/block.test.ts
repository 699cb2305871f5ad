import { describe, expect, it } from 'vitest'
import { MemoryReader, refAt } from '../memory-reader.ts'
import { block } from './block.ts'

const ALICE = 'did:plc:alicealicealicealicealic'
const BOB = 'did:plc:bobbobbobbobbobbobbobbobb'
const CAROL = 'did:plc:carolcarolcarolcarolcaro'
const CID = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
const INDEXED = '2026-03-01T12:00:00.000Z'
const URI = `at://${ALICE}/app.bsky.graph.block/3kblock00001`

const record = (extra: object = {}) =>
  block.parse({
    $type: 'app.bsky.graph.block',
    subject: BOB,
    createdAt: '2026-03-01T11:00:00.000Z',
    ...extra,
  })
const ref = (uri = URI) => refAt(uri, CID, INDEXED)
/** The row as stored: the generated sortAt added. */
const stored = (rec = record(), uri = URI) => {
  const row = block.toRow(new MemoryReader(), ref(uri), rec)!
  return { ...row, sortAt: row.createdAt < INDEXED ? row.createdAt : INDEXED }
}

describe('app.bsky.graph.block', () => {
  it('refuses a record that is not a block', () => {
    expect(() => block.parse({ $type: 'app.bsky.graph.block', createdAt: INDEXED })).toThrow()
    expect(() =>
      block.parse({ $type: 'app.bsky.graph.block', subject: 'bob.test', createdAt: INDEXED }),
    ).toThrow()
    expect(() => block.parse({ $type: 'app.bsky.graph.block', subject: BOB })).toThrow()
  })

  it('makes its row from the record, createdAt normalised as the stock stores it', () => {
    const rec = record({ createdAt: '2026-03-01T11:00:00Z' })
    expect(block.toRow(new MemoryReader(), ref(), rec)).toEqual({
      uri: URI,
      cid: CID,
      creator: ALICE,
      subjectDid: BOB,
      createdAt: '2026-03-01T11:00:00.000Z',
      indexedAt: INDEXED,
    })
  })

  it('finds the block that holds its slot: one block per creator and subject', () => {
    const first = `at://${ALICE}/app.bsky.graph.block/3kfirst`
    const db = new MemoryReader().put('actor_block', {
      uri: first,
      creator: ALICE,
      subjectDid: BOB,
    })
    expect(block.findDuplicate!(db, ref(), record())).toBe(first)
    const others = new MemoryReader().put(
      'actor_block',
      { uri: `at://${CAROL}/app.bsky.graph.block/3kfirst`, creator: CAROL, subjectDid: BOB },
      { uri: first, creator: ALICE, subjectDid: CAROL },
    )
    expect(block.findDuplicate!(others, ref(), record())).toBeNull()
  })

  it('counts nothing and notifies nobody, created or deleted', () => {
    // The stock neither aggregates blocks nor tells the blocked account.
    const row = stored()
    expect(block.onInsert(new MemoryReader(), row, ref(), record())).toEqual({})
    expect(block.onDelete(new MemoryReader(), row, null)).toEqual({})
    expect(block.onDelete(new MemoryReader(), row, row, record())).toEqual({})
  })
})

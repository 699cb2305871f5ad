import { describe, expect, it } from 'vitest'
import { MemoryReader, refAt } from '../memory-reader.ts'
import { listBlock } from './list-block.ts'

const ALICE = 'did:plc:alicealicealicealicealic'
const BOB = 'did:plc:bobbobbobbobbobbobbobbobb'
const CAROL = 'did:plc:carolcarolcarolcarolcaro'
const CID = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
const INDEXED = '2026-03-01T12:00:00.000Z'
const LIST = `at://${BOB}/app.bsky.graph.list/3klist000001`
const URI = `at://${ALICE}/app.bsky.graph.listblock/3klblock0001`

const record = (extra: object = {}) =>
  listBlock.parse({
    $type: 'app.bsky.graph.listblock',
    subject: LIST,
    createdAt: '2026-03-01T11:00:00.000Z',
    ...extra,
  })
const ref = (uri = URI) => refAt(uri, CID, INDEXED)
/** The row as stored: the generated sortAt added. */
const stored = (rec = record(), uri = URI) => {
  const row = listBlock.toRow(new MemoryReader(), ref(uri), rec)!
  return { ...row, sortAt: row.createdAt < INDEXED ? row.createdAt : INDEXED }
}

describe('app.bsky.graph.listblock', () => {
  it('refuses a record that is not a list block', () => {
    const base = { $type: 'app.bsky.graph.listblock', createdAt: INDEXED }
    expect(() => listBlock.parse(base)).toThrow()
    expect(() => listBlock.parse({ ...base, subject: BOB })).toThrow()
    expect(() => listBlock.parse({ ...base, subject: LIST, createdAt: 'soon' })).toThrow()
  })

  it('makes its row from the record, createdAt normalised as the stock stores it', () => {
    const rec = record({ createdAt: '2026-03-01T11:00:00Z' })
    expect(listBlock.toRow(new MemoryReader(), ref(), rec)).toEqual({
      uri: URI,
      cid: CID,
      creator: ALICE,
      subjectUri: LIST,
      createdAt: '2026-03-01T11:00:00.000Z',
      indexedAt: INDEXED,
    })
  })

  it('finds the list block that holds its slot: one per creator and list', () => {
    const first = `at://${ALICE}/app.bsky.graph.listblock/3kfirst`
    const db = new MemoryReader().put('list_block', {
      uri: first,
      creator: ALICE,
      subjectUri: LIST,
    })
    expect(listBlock.findDuplicate!(db, ref(), record())).toBe(first)
    const others = new MemoryReader().put(
      'list_block',
      { uri: `at://${CAROL}/app.bsky.graph.listblock/3kfirst`, creator: CAROL, subjectUri: LIST },
      { uri: first, creator: ALICE, subjectUri: `at://${BOB}/app.bsky.graph.list/3kother` },
    )
    expect(listBlock.findDuplicate!(others, ref(), record())).toBeNull()
  })

  it('counts nothing and notifies nobody, created or deleted', () => {
    const row = stored()
    expect(listBlock.onInsert(new MemoryReader(), row, ref(), record())).toEqual({})
    expect(listBlock.onDelete(new MemoryReader(), row, null)).toEqual({})
    expect(listBlock.onDelete(new MemoryReader(), row, row, record())).toEqual({})
  })
})

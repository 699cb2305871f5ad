import { describe, expect, it } from 'vitest'
import { InvalidRecordError } from '../lexicon.ts'
import { MemoryReader, refAt } from '../memory-reader.ts'
import { listItem } from './list-item.ts'

const ALICE = 'did:plc:alicealicealicealicealic'
const BOB = 'did:plc:bobbobbobbobbobbobbobbobb'
const CAROL = 'did:plc:carolcarolcarolcarolcaro'
const CID = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
const INDEXED = '2026-03-01T12:00:00.000Z'
const LIST = `at://${ALICE}/app.bsky.graph.list/3klist000001`
const URI = `at://${ALICE}/app.bsky.graph.listitem/3kitem000001`

const record = (extra: object = {}) =>
  listItem.parse({
    $type: 'app.bsky.graph.listitem',
    subject: BOB,
    list: LIST,
    createdAt: '2026-03-01T11:00:00.000Z',
    ...extra,
  })
const ref = (uri = URI) => refAt(uri, CID, INDEXED)
/** The row as stored: the generated sortAt added. */
const stored = (rec = record(), uri = URI) => {
  const row = listItem.toRow(new MemoryReader(), ref(uri), rec)!
  return { ...row, sortAt: row.createdAt < INDEXED ? row.createdAt : INDEXED }
}

describe('app.bsky.graph.listitem', () => {
  it('refuses a record that is not a list item', () => {
    const base = { $type: 'app.bsky.graph.listitem', createdAt: INDEXED }
    expect(() => listItem.parse({ ...base, subject: BOB })).toThrow()
    expect(() => listItem.parse({ ...base, list: LIST })).toThrow()
    expect(() => listItem.parse({ ...base, subject: 'bob.test', list: LIST })).toThrow()
    expect(() => listItem.parse({ ...base, subject: BOB, list: 'nope' })).toThrow()
  })

  it("drops an item added to someone else's list", () => {
    expect(() => listItem.check!(ref(), record())).not.toThrow()
    const bobs = record({ list: `at://${BOB}/app.bsky.graph.list/3klist000001` })
    expect(() => listItem.check!(ref(), bobs)).toThrow(InvalidRecordError)
    // The stock compares hosts: a list named by its owner's handle is not the owner's.
    const byHandle = record({ list: 'at://alice.test/app.bsky.graph.list/3klist000001' })
    expect(() => listItem.check!(ref(), byHandle)).toThrow(InvalidRecordError)
    // A promoted duplicate skips check; making its row checks again.
    expect(() => listItem.toRow(new MemoryReader(), ref(), bobs)).toThrow(InvalidRecordError)
  })

  it('makes its row from the record, createdAt normalised as the stock stores it', () => {
    const rec = record({ createdAt: '2026-03-01T11:00:00Z' })
    expect(listItem.toRow(new MemoryReader(), ref(), rec)).toEqual({
      uri: URI,
      cid: CID,
      creator: ALICE,
      subjectDid: BOB,
      listUri: LIST,
      createdAt: '2026-03-01T11:00:00.000Z',
      indexedAt: INDEXED,
    })
  })

  it('finds the item that holds its slot: one per list and subject', () => {
    const first = `at://${ALICE}/app.bsky.graph.listitem/3kfirst`
    const db = new MemoryReader().put('list_item', { uri: first, listUri: LIST, subjectDid: BOB })
    expect(listItem.findDuplicate!(db, ref(), record())).toBe(first)
    const others = new MemoryReader().put(
      'list_item',
      { uri: first, listUri: LIST, subjectDid: CAROL },
      { uri: first, listUri: `at://${ALICE}/app.bsky.graph.list/3kother`, subjectDid: BOB },
    )
    expect(listItem.findDuplicate!(others, ref(), record())).toBeNull()
  })

  it('counts nothing and notifies nobody, created or deleted', () => {
    const row = stored()
    expect(listItem.onInsert(new MemoryReader(), row, ref(), record())).toEqual({})
    expect(listItem.onDelete(new MemoryReader(), row, null)).toEqual({})
    expect(listItem.onDelete(new MemoryReader(), row, row, record())).toEqual({})
  })
})

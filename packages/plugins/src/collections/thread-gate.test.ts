import { describe, expect, it } from 'vitest'
import { InvalidRecordError } from '../lexicon.ts'
import { MemoryReader, refAt } from '../memory-reader.ts'
import { threadGate } from './thread-gate.ts'

const ALICE = 'did:plc:alicealicealicealicealic'
const BOB = 'did:plc:bobbobbobbobbobbobbobbobb'
const CID = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
const INDEXED = '2026-03-01T12:00:00.000Z'
const POST = `at://${ALICE}/app.bsky.feed.post/3kpost000001`
const URI = `at://${ALICE}/app.bsky.feed.threadgate/3kpost000001`

const record = (extra: object = {}) =>
  threadGate.parse({
    $type: 'app.bsky.feed.threadgate',
    post: POST,
    allow: [{ $type: 'app.bsky.feed.threadgate#followingRule' }],
    createdAt: '2026-03-01T11:00:00.000Z',
    ...extra,
  })
const ref = (uri = URI) => refAt(uri, CID, INDEXED)
/** The row as stored: the generated sortAt added. */
const stored = (rec = record(), uri = URI) => {
  const row = threadGate.toRow(new MemoryReader(), ref(uri), rec)!
  return { ...row, sortAt: row.createdAt < INDEXED ? row.createdAt : INDEXED }
}

describe('app.bsky.feed.threadgate', () => {
  it('refuses a record that is not a thread gate', () => {
    const base = { $type: 'app.bsky.feed.threadgate', createdAt: INDEXED }
    expect(() => threadGate.parse(base)).toThrow()
    expect(() => threadGate.parse({ ...base, post: 'nope' })).toThrow()
    expect(() => threadGate.parse({ ...base, post: POST, hiddenReplies: ['nope'] })).toThrow()
    expect(() => threadGate.parse({ ...base, post: POST, createdAt: 'now' })).toThrow()
  })

  it('drops a gate that is not beside its post: same repo, same rkey', () => {
    expect(() => threadGate.check!(ref(), record())).not.toThrow()
    const bobs = record({ post: `at://${BOB}/app.bsky.feed.post/3kpost000001` })
    expect(() => threadGate.check!(ref(), bobs)).toThrow(InvalidRecordError)
    const other = record({ post: `at://${ALICE}/app.bsky.feed.post/3kpost000002` })
    expect(() => threadGate.check!(ref(), other)).toThrow(InvalidRecordError)
    // The stock compares only repo and rkey, not the collection the uri names.
    const notPost = record({ post: `at://${ALICE}/app.bsky.feed.like/3kpost000001` })
    expect(() => threadGate.check!(ref(), notPost)).not.toThrow()
    // A promoted duplicate skips check; making its row checks again.
    expect(() => threadGate.toRow(new MemoryReader(), ref(), bobs)).toThrow(InvalidRecordError)
  })

  it('makes its row from the record, createdAt normalised as the stock stores it', () => {
    const rec = record({ createdAt: '2026-03-01T13:00:00+02:00' })
    expect(threadGate.toRow(new MemoryReader(), ref(), rec)).toEqual({
      uri: URI,
      cid: CID,
      creator: ALICE,
      postUri: POST,
      createdAt: '2026-03-01T11:00:00.000Z',
      indexedAt: INDEXED,
    })
  })

  it('finds the gate that holds its slot: one per post', () => {
    const first = `at://${ALICE}/app.bsky.feed.threadgate/3kfirst`
    const db = new MemoryReader().put('thread_gate', { uri: first, postUri: POST })
    expect(threadGate.findDuplicate!(db, ref(), record())).toBe(first)
    const other = new MemoryReader().put('thread_gate', {
      uri: first,
      postUri: `at://${ALICE}/app.bsky.feed.post/3kpost000002`,
    })
    expect(threadGate.findDuplicate!(other, ref(), record())).toBeNull()
  })

  it('flags its post with every create, a duplicate or a gate before its post included', () => {
    expect(threadGate.unconditional!.create(ref(), record())).toEqual([
      { kind: 'update', table: 'post', where: { uri: POST }, set: { hasThreadGate: true } },
    ])
  })

  it('writes nothing more when inserted, and nothing on a delete whether or not it was indexed', () => {
    // Replies indexed before the gate keep their verdicts, as in the stock.
    expect(threadGate.onInsert(new MemoryReader(), stored(), ref(), record())).toEqual({})
    expect(threadGate.unconditional!.delete(new MemoryReader(), URI)).toEqual({})
  })

  it('unflags its post when its row is deleted, replaced or not', () => {
    // On an update the create that follows flags the post again, as the stock's insert does.
    const row = stored()
    const unflag = {
      rows: [
        { kind: 'update', table: 'post', where: { uri: POST }, set: { hasThreadGate: false } },
      ],
    }
    expect(threadGate.onDelete(new MemoryReader(), row, null)).toEqual(unflag)
    expect(threadGate.onDelete(new MemoryReader(), row, row, record())).toEqual(unflag)
  })
})

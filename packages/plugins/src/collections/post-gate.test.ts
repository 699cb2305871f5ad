import { describe, expect, it } from 'vitest'
import { InvalidRecordError } from '../lexicon.ts'
import { MemoryReader, refAt } from '../memory-reader.ts'
import { postGate } from './post-gate.ts'

const ALICE = 'did:plc:alicealicealicealicealic'
const BOB = 'did:plc:bobbobbobbobbobbobbobbobb'
const CID = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
const INDEXED = '2026-03-01T12:00:00.000Z'
const POST = `at://${ALICE}/app.bsky.feed.post/3kpost000001`
const URI = `at://${ALICE}/app.bsky.feed.postgate/3kpost000001`

const record = (extra: object = {}) =>
  postGate.parse({
    $type: 'app.bsky.feed.postgate',
    post: POST,
    embeddingRules: [{ $type: 'app.bsky.feed.postgate#disableRule' }],
    createdAt: '2026-03-01T11:00:00.000Z',
    ...extra,
  })
const ref = (uri = URI) => refAt(uri, CID, INDEXED)
/** The row as stored: the generated sortAt added. */
const stored = (rec = record(), uri = URI) => {
  const row = postGate.toRow(new MemoryReader(), ref(uri), rec)!
  return { ...row, sortAt: row.createdAt < INDEXED ? row.createdAt : INDEXED }
}

describe('app.bsky.feed.postgate', () => {
  it('refuses a record that is not a post gate', () => {
    const base = { $type: 'app.bsky.feed.postgate', createdAt: INDEXED }
    expect(() => postGate.parse(base)).toThrow()
    expect(() => postGate.parse({ ...base, post: 'nope' })).toThrow()
    expect(() => postGate.parse({ ...base, post: POST, detachedEmbeddingUris: ['nope'] })).toThrow()
    expect(() => postGate.parse({ ...base, post: POST, createdAt: 'now' })).toThrow()
  })

  it('drops a gate that is not beside its post: same repo, same rkey', () => {
    expect(() => postGate.check!(ref(), record())).not.toThrow()
    const bobs = record({ post: `at://${BOB}/app.bsky.feed.post/3kpost000001` })
    expect(() => postGate.check!(ref(), bobs)).toThrow(InvalidRecordError)
    const other = record({ post: `at://${ALICE}/app.bsky.feed.post/3kpost000002` })
    expect(() => postGate.check!(ref(), other)).toThrow(InvalidRecordError)
    // The stock compares only repo and rkey, not the collection the uri names.
    const notPost = record({ post: `at://${ALICE}/app.bsky.feed.like/3kpost000001` })
    expect(() => postGate.check!(ref(), notPost)).not.toThrow()
    // A promoted duplicate skips check; making its row checks again.
    expect(() => postGate.toRow(new MemoryReader(), ref(), bobs)).toThrow(InvalidRecordError)
  })

  it('makes its row from the record, createdAt normalised as the stock stores it', () => {
    const rec = record({ createdAt: '2026-03-01T13:00:00+02:00' })
    expect(postGate.toRow(new MemoryReader(), ref(), rec)).toEqual({
      uri: URI,
      cid: CID,
      creator: ALICE,
      postUri: POST,
      createdAt: '2026-03-01T11:00:00.000Z',
      indexedAt: INDEXED,
    })
  })

  it('finds the gate that holds its slot: one per post', () => {
    const first = `at://${ALICE}/app.bsky.feed.postgate/3kfirst`
    const db = new MemoryReader().put('post_gate', { uri: first, postUri: POST })
    expect(postGate.findDuplicate!(db, ref(), record())).toBe(first)
    const other = new MemoryReader().put('post_gate', {
      uri: first,
      postUri: `at://${ALICE}/app.bsky.feed.post/3kpost000002`,
    })
    expect(postGate.findDuplicate!(other, ref(), record())).toBeNull()
  })

  it('flags its post with every create, a duplicate or a gate before its post included', () => {
    expect(postGate.unconditional!.create(ref(), record())).toEqual([
      { kind: 'update', table: 'post', where: { uri: POST }, set: { hasPostGate: true } },
    ])
  })

  it('writes nothing more when inserted, and nothing on a delete whether or not it was indexed', () => {
    // Quotes indexed before the gate keep their verdicts, as in the stock.
    expect(postGate.onInsert(new MemoryReader(), stored(), ref(), record())).toEqual({})
    expect(postGate.unconditional!.delete(new MemoryReader(), URI)).toEqual({})
  })

  it('unflags its post when its row is deleted, replaced or not', () => {
    // On an update the create that follows flags the post again, as the stock's insert does.
    const row = stored()
    const unflag = {
      rows: [{ kind: 'update', table: 'post', where: { uri: POST }, set: { hasPostGate: false } }],
    }
    expect(postGate.onDelete(new MemoryReader(), row, null)).toEqual(unflag)
    expect(postGate.onDelete(new MemoryReader(), row, row, record())).toEqual(unflag)
  })
})

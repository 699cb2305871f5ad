// Thread gates and post gates are one plugin shape (gate.ts): each case runs for both.
import { describe, expect, it } from 'vitest'
import { InvalidRecordError } from '../lexicon.ts'
import { MemoryReader, refAt } from '../memory-reader.ts'
import type { RecordPlugin } from '../types.ts'
import { postGate } from './post-gate.ts'
import { threadGate } from './thread-gate.ts'

const ALICE = 'did:plc:alicealicealicealicealic'
const BOB = 'did:plc:bobbobbobbobbobbobbobbobb'
const CID = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
const INDEXED = '2026-03-01T12:00:00.000Z'
const POST = `at://${ALICE}/app.bsky.feed.post/3kpost000001`

/** Either gate, as the writer holds it: a record in, its effects out. */
type Gate = RecordPlugin<unknown, 'thread_gate' | 'post_gate'>

const gates = [
  {
    plugin: threadGate as unknown as Gate,
    nsid: 'app.bsky.feed.threadgate',
    table: 'thread_gate' as const,
    flag: 'hasThreadGate',
    // A rule of its own, and a field its lexicon refuses a value of.
    rules: { allow: [{ $type: 'app.bsky.feed.threadgate#followingRule' }] },
    badList: { hiddenReplies: ['nope'] },
  },
  {
    plugin: postGate as unknown as Gate,
    nsid: 'app.bsky.feed.postgate',
    table: 'post_gate' as const,
    flag: 'hasPostGate',
    rules: { embeddingRules: [{ $type: 'app.bsky.feed.postgate#disableRule' }] },
    badList: { detachedEmbeddingUris: ['nope'] },
  },
]

describe.each(gates)('$nsid', ({ plugin, nsid, table, flag, rules, badList }) => {
  const URI = `at://${ALICE}/${nsid}/3kpost000001`
  const record = (extra: object = {}) =>
    plugin.parse({
      $type: nsid,
      post: POST,
      ...rules,
      createdAt: '2026-03-01T11:00:00.000Z',
      ...extra,
    })
  const ref = (uri = URI) => refAt(uri, CID, INDEXED)
  /** The row as stored: the generated sortAt added. */
  const stored = () => {
    const row = plugin.toRow(new MemoryReader(), ref(), record())!
    return { ...row, sortAt: row.createdAt < INDEXED ? row.createdAt : INDEXED }
  }

  it('refuses a record that is not a gate', () => {
    const base = { $type: nsid, createdAt: INDEXED }
    expect(() => plugin.parse(base)).toThrow()
    expect(() => plugin.parse({ ...base, post: 'nope' })).toThrow()
    expect(() => plugin.parse({ ...base, post: POST, ...badList })).toThrow()
    expect(() => plugin.parse({ ...base, post: POST, createdAt: 'now' })).toThrow()
  })

  it('drops a gate that is not beside its post: same repo, same rkey', () => {
    expect(() => plugin.check!(ref(), record())).not.toThrow()
    const bobs = record({ post: `at://${BOB}/app.bsky.feed.post/3kpost000001` })
    expect(() => plugin.check!(ref(), bobs)).toThrow(InvalidRecordError)
    const other = record({ post: `at://${ALICE}/app.bsky.feed.post/3kpost000002` })
    expect(() => plugin.check!(ref(), other)).toThrow(InvalidRecordError)
    // The stock compares only repo and rkey, not the collection the uri names.
    const notPost = record({ post: `at://${ALICE}/app.bsky.feed.like/3kpost000001` })
    expect(() => plugin.check!(ref(), notPost)).not.toThrow()
    // A promoted duplicate skips check; making its row checks again.
    expect(() => plugin.toRow(new MemoryReader(), ref(), bobs)).toThrow(InvalidRecordError)
  })

  it('makes its row from the record, createdAt normalised as the stock stores it', () => {
    const rec = record({ createdAt: '2026-03-01T13:00:00+02:00' })
    expect(plugin.toRow(new MemoryReader(), ref(), rec)).toEqual({
      uri: URI,
      cid: CID,
      creator: ALICE,
      postUri: POST,
      createdAt: '2026-03-01T11:00:00.000Z',
      indexedAt: INDEXED,
    })
  })

  it('finds the gate that holds its slot: one per post', () => {
    const first = `at://${ALICE}/${nsid}/3kfirst`
    const db = new MemoryReader().put(table, { uri: first, postUri: POST })
    expect(plugin.findDuplicate!(db, ref(), record())).toBe(first)
    const other = new MemoryReader().put(table, {
      uri: first,
      postUri: `at://${ALICE}/app.bsky.feed.post/3kpost000002`,
    })
    expect(plugin.findDuplicate!(other, ref(), record())).toBeNull()
  })

  it('flags its post with every create, a duplicate or a gate before its post included', () => {
    expect(plugin.unconditional!.create(ref(), record())).toEqual([
      { kind: 'update', table: 'post', where: { uri: POST }, set: { [flag]: true } },
    ])
  })

  it('writes nothing more when inserted, and nothing on a delete whether or not it was indexed', () => {
    // Replies and quotes indexed before the gate keep their verdicts, as in the stock.
    expect(plugin.onInsert(new MemoryReader(), stored() as never, ref(), record())).toEqual({})
    expect(plugin.unconditional!.delete(new MemoryReader(), URI)).toEqual({})
  })

  it('unflags its post when its row is deleted, replaced or not', () => {
    // On an update the create that follows flags the post again, as the stock's insert does.
    const row = stored() as never
    const unflag = {
      rows: [{ kind: 'update', table: 'post', where: { uri: POST }, set: { [flag]: false } }],
    }
    expect(plugin.onDelete(new MemoryReader(), row, null)).toEqual(unflag)
    expect(plugin.onDelete(new MemoryReader(), row, row, record())).toEqual(unflag)
  })
})

import { describe, expect, it } from 'vitest'
import { MemoryReader, refAt } from '../memory-reader.ts'
import { repost } from './repost.ts'

const ALICE = 'did:plc:alicealicealicealicealic'
const BOB = 'did:plc:bobbobbobbobbobbobbobbobb'
const CAROL = 'did:plc:carolcarolcarolcarolcaro'
const CID = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
// A second CID, so a subject's CID cannot pass for the record's own.
const SUBJECT_CID = 'bafyreihffx5a2e7k5uwrmmgofbvzujc5cmw5h4espouwuxt3liqoflx3ee'
const VIA_CID = 'bafyreiclp443lavogvhj3d2ob2cxbfuscni2k5jk7bebjzg7khl3esabwq'
const INDEXED = '2026-03-01T12:00:00.000Z'
const POST = `at://${BOB}/app.bsky.feed.post/3kpost000001`
const VIA = `at://${CAROL}/app.bsky.feed.repost/3krepost0002`
const URI = `at://${ALICE}/app.bsky.feed.repost/3krepost0001`

const record = (extra: object = {}) =>
  repost.parse({
    $type: 'app.bsky.feed.repost',
    subject: { uri: POST, cid: SUBJECT_CID },
    createdAt: '2026-03-01T11:00:00.000Z',
    ...extra,
  })
const ref = (uri = URI) => refAt(uri, CID, INDEXED)
/** The row as stored: absent columns null, the generated sortAt added. */
const stored = (rec = record(), uri = URI) => {
  const row = repost.toRow(new MemoryReader(), ref(uri), rec)!
  const sortAt = row.createdAt < INDEXED ? row.createdAt : INDEXED
  return { ...row, via: row.via ?? null, viaCid: row.viaCid ?? null, sortAt }
}

describe('app.bsky.feed.repost', () => {
  it('refuses a record that is not a repost', () => {
    const base = { $type: 'app.bsky.feed.repost', createdAt: INDEXED }
    expect(() => repost.parse(base)).toThrow()
    expect(() => repost.parse({ ...base, subject: { uri: 'nope', cid: SUBJECT_CID } })).toThrow()
    expect(() => repost.parse({ ...base, subject: { uri: POST } })).toThrow()
    expect(() =>
      repost.parse({ ...base, subject: { uri: POST, cid: SUBJECT_CID }, createdAt: 'yesterday' }),
    ).toThrow()
  })

  it('makes its row from the record, createdAt normalised as the stock stores it', () => {
    const rec = record({ createdAt: '2026-03-01T13:00:00+02:00' })
    expect(repost.toRow(new MemoryReader(), ref(), rec)).toEqual({
      uri: URI,
      cid: CID,
      creator: ALICE,
      subject: POST,
      subjectCid: SUBJECT_CID,
      via: null,
      viaCid: null,
      createdAt: '2026-03-01T11:00:00.000Z',
      indexedAt: INDEXED,
    })
  })

  it('keeps the repost it came via', () => {
    const rec = record({ via: { uri: VIA, cid: VIA_CID } })
    const row = repost.toRow(new MemoryReader(), ref(), rec)!
    expect([row.via, row.viaCid]).toEqual([VIA, VIA_CID])
  })

  it('finds the repost that holds its slot: one repost per creator and subject', () => {
    const first = `at://${ALICE}/app.bsky.feed.repost/3kfirst`
    const db = new MemoryReader().put('repost', { uri: first, creator: ALICE, subject: POST })
    expect(repost.findDuplicate!(db, ref(), record())).toBe(first)
    // Someone else's repost of the same post, or Alice's of another post, holds no slot of hers.
    const others = new MemoryReader().put(
      'repost',
      { uri: `at://${CAROL}/app.bsky.feed.repost/3kfirst`, creator: CAROL, subject: POST },
      { uri: first, creator: ALICE, subject: `at://${BOB}/app.bsky.feed.post/3kother` },
    )
    expect(repost.findDuplicate!(others, ref(), record())).toBeNull()
  })

  it('counts a repost on its subject and notifies the subject author, and a reposter it came via', () => {
    const rec = record({ via: { uri: VIA, cid: VIA_CID } })
    const effects = repost.onInsert(new MemoryReader(), stored(rec), ref(), rec)
    expect(effects.counters).toEqual([
      { table: 'post_agg', key: POST, column: 'repostCount', delta: 1 },
    ])
    const base = {
      author: ALICE,
      recordUri: URI,
      recordCid: CID,
      sortAt: '2026-03-01T11:00:00.000Z',
    }
    expect(effects.notifications).toEqual([
      { ...base, did: BOB, reason: 'repost', reasonSubject: POST },
      { ...base, did: CAROL, reason: 'repost-via-repost', reasonSubject: VIA },
    ])
  })

  it('sorts its notifications at the index time when the record claims a later date', () => {
    const rec = record({ createdAt: '2026-03-02T00:00:00.000Z' })
    const effects = repost.onInsert(new MemoryReader(), stored(rec), ref(), rec)
    expect(effects.notifications?.map((n) => n.sortAt)).toEqual([INDEXED])
  })

  it('notifies nobody of a repost of your own post, not even the reposter it came via', () => {
    const ownPost = `at://${ALICE}/app.bsky.feed.post/3kpost000002`
    const rec = record({
      subject: { uri: ownPost, cid: SUBJECT_CID },
      via: { uri: VIA, cid: VIA_CID },
    })
    const effects = repost.onInsert(new MemoryReader(), stored(rec), ref(), rec)
    expect(effects).toEqual({
      counters: [{ table: 'post_agg', key: ownPost, column: 'repostCount', delta: 1 }],
      notifications: [],
    })
  })

  it('does not notify a reposter who is the one reposting', () => {
    const viaSelf = `at://${ALICE}/app.bsky.feed.repost/3kr`
    const rec = record({ via: { uri: viaSelf, cid: VIA_CID } })
    const effects = repost.onInsert(new MemoryReader(), stored(rec), ref(), rec)
    expect(effects.notifications?.map((n) => [n.did, n.reason])).toEqual([[BOB, 'repost']])
  })

  it('takes its count back when deleted, and its notifications unless it is replaced', () => {
    const row = stored()
    expect(repost.onDelete(new MemoryReader(), row, null)).toEqual({
      counters: [{ table: 'post_agg', key: POST, column: 'repostCount', delta: -1 }],
      deleteNotificationsFor: [URI],
    })
    expect(repost.onDelete(new MemoryReader(), row, row, record())).toEqual({
      counters: [{ table: 'post_agg', key: POST, column: 'repostCount', delta: -1 }],
      deleteNotificationsFor: [],
    })
  })

  it('writes a feed item with every create, sorted at the earlier of its dates', () => {
    expect(repost.unconditional!.create(ref(), record())).toEqual([
      {
        kind: 'insert',
        table: 'feed_item',
        values: {
          type: 'repost',
          uri: URI,
          cid: CID,
          postUri: POST,
          originatorDid: ALICE,
          sortAt: '2026-03-01T11:00:00.000Z',
        },
      },
    ])
    // A createdAt in the future (and not normalised as given) sorts at the index time.
    const later = repost.unconditional!.create(
      ref(),
      record({ createdAt: '2026-03-01T14:00:00+01:00' }),
    )
    expect(later[0]).toMatchObject({ values: { sortAt: INDEXED } })
  })

  it('takes the feed item away with every delete', () => {
    expect(repost.unconditional!.delete(new MemoryReader(), URI)).toEqual({
      rows: [{ kind: 'delete', table: 'feed_item', where: { uri: URI } }],
    })
  })
})

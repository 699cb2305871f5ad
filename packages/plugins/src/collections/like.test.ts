import { describe, expect, it } from 'vitest'
import { MemoryReader, refAt } from '../memory-reader.ts'
import { like } from './like.ts'

const ALICE = 'did:plc:alicealicealicealicealic'
const BOB = 'did:plc:bobbobbobbobbobbobbobbobb'
const CAROL = 'did:plc:carolcarolcarolcarolcaro'
const CID = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
const INDEXED = '2026-03-01T12:00:00.000Z'
const POST = `at://${BOB}/app.bsky.feed.post/3kpost000001`
const REPOST = `at://${CAROL}/app.bsky.feed.repost/3krepost0001`
const URI = `at://${ALICE}/app.bsky.feed.like/3klike000001`

const record = (extra: object = {}) =>
  like.parse({
    $type: 'app.bsky.feed.like',
    subject: { uri: POST, cid: CID },
    createdAt: '2026-03-01T11:00:00.000Z',
    ...extra,
  })
const ref = (uri = URI) => refAt(uri, CID, INDEXED)
/** The row as stored: the generated sortAt added. */
const stored = (rec = record(), uri = URI) => {
  const row = like.toRow(new MemoryReader(), ref(uri), rec)!
  const sortAt = row.createdAt < INDEXED ? row.createdAt : INDEXED
  return { ...row, via: row.via ?? null, viaCid: row.viaCid ?? null, sortAt }
}

describe('app.bsky.feed.like', () => {
  it('refuses a record that is not a like', () => {
    expect(() => like.parse({ $type: 'app.bsky.feed.like', createdAt: INDEXED })).toThrow()
    expect(() =>
      like.parse({
        $type: 'app.bsky.feed.like',
        subject: { uri: 'nope', cid: CID },
        createdAt: INDEXED,
      }),
    ).toThrow()
  })

  it('makes its row from the record, createdAt normalised as the stock stores it', () => {
    const rec = record({ createdAt: '2026-03-01T11:00:00Z' })
    expect(like.toRow(new MemoryReader(), ref(), rec)).toEqual({
      uri: URI,
      cid: CID,
      creator: ALICE,
      subject: POST,
      subjectCid: CID,
      via: null,
      viaCid: null,
      createdAt: '2026-03-01T11:00:00.000Z',
      indexedAt: INDEXED,
    })
  })

  it('counts a like on its subject and notifies the subject author, and a reposter it came via', () => {
    const rec = record({ via: { uri: REPOST, cid: CID } })
    const effects = like.onInsert(new MemoryReader(), stored(rec), ref(), rec)
    expect(effects.counters).toEqual([
      { table: 'post_agg', key: POST, column: 'likeCount', delta: 1 },
    ])
    const base = {
      author: ALICE,
      recordUri: URI,
      recordCid: CID,
      sortAt: '2026-03-01T11:00:00.000Z',
    }
    expect(effects.notifications).toEqual([
      { ...base, did: BOB, reason: 'like', reasonSubject: POST },
      { ...base, did: CAROL, reason: 'like-via-repost', reasonSubject: REPOST },
    ])
  })

  it('notifies nobody of a like of your own post, and no reposter who is the liker', () => {
    const own = `at://${ALICE}/app.bsky.feed.like/3klike000002`
    const ownPost = `at://${ALICE}/app.bsky.feed.post/3kpost000002`
    const rec = record({ subject: { uri: ownPost, cid: CID } })
    const mine = like.onInsert(new MemoryReader(), stored(rec, own), ref(own), rec)
    expect(mine.notifications).toEqual([])
    expect(mine.counters).toEqual([
      { table: 'post_agg', key: ownPost, column: 'likeCount', delta: 1 },
    ])
    const viaSelf = record({ via: { uri: `at://${ALICE}/app.bsky.feed.repost/3kr`, cid: CID } })
    const effects = like.onInsert(new MemoryReader(), stored(viaSelf), ref(), viaSelf)
    expect(effects.notifications?.map((n) => n.reason)).toEqual(['like'])
  })

  it('finds the like that holds its slot: one like per creator and subject', () => {
    const db = new MemoryReader().put('like', {
      uri: `at://${ALICE}/app.bsky.feed.like/3kfirst`,
      creator: ALICE,
      subject: POST,
    })
    expect(like.findDuplicate!(db, ref(), record())).toBe(
      `at://${ALICE}/app.bsky.feed.like/3kfirst`,
    )
    expect(like.findDuplicate!(new MemoryReader(), ref(), record())).toBeNull()
  })

  it('takes its count back when deleted, and its notifications unless it is replaced', () => {
    const row = stored()
    expect(like.onDelete(new MemoryReader(), row, null)).toEqual({
      counters: [{ table: 'post_agg', key: POST, column: 'likeCount', delta: -1 }],
      deleteNotificationsFor: [URI],
    })
    expect(like.onDelete(new MemoryReader(), row, row).deleteNotificationsFor).toEqual([])
  })
})

import { lexParse } from '@atproto/lex-json'
import type { Selectable } from 'kysely'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { MemoryReader, refAt } from '../memory-reader.ts'
import type { Effects, Tables } from '../types.ts'
import { profile } from './profile.ts'

const ALICE = 'did:plc:alicealicealicealicealic'
const BOB = 'did:plc:bobbobbobbobbobbobbobbobb'
const CID = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
const AVATAR = 'bafkreiehxpuhtr5f6v4eu4byjo2j7kkrhjvd7psmfu4imnpdzb3bdqb7vy'
const BANNER = 'bafkreiemp3jntpsz4ioppt6h3j24nqglpxlvd5fiodypsi3pb424xl2yjy'
const INDEXED = '2026-03-01T12:00:00.000Z'
const PACK = `at://${BOB}/app.bsky.graph.starterpack/3kpack000001`
const PINNED = `at://${ALICE}/app.bsky.feed.post/3kpost000001`
const URI = `at://${ALICE}/app.bsky.actor.profile/self`

/** A blob as a record decoded from the repo carries it: its ref a CID, not a string. */
const blob = (cid: string) =>
  lexParse(JSON.stringify({ $type: 'blob', ref: { $link: cid }, mimeType: 'image/jpeg', size: 1 }))
const record = (extra: object = {}) => profile.parse({ $type: 'app.bsky.actor.profile', ...extra })
const ref = (uri = URI) => refAt(uri, CID, INDEXED)
/** The row as stored: every column present, absent values NULL. */
const stored = (values: Partial<Selectable<Tables['profile']>> = {}) => ({
  uri: URI,
  cid: CID,
  creator: ALICE,
  displayName: null,
  description: null,
  avatarCid: null,
  bannerCid: null,
  joinedViaStarterPackUri: null,
  pinnedPost: null,
  pinnedPostCid: null,
  createdAt: '2026-03-01T11:00:00.000Z',
  indexedAt: INDEXED,
  ...values,
})
/** Every kind of effect, an absent one as empty, so a stray effect fails the comparison. */
const all = (e: Effects) => ({
  rows: e.rows ?? [],
  counters: e.counters ?? [],
  notifications: e.notifications ?? [],
  deleteNotificationsFor: e.deleteNotificationsFor ?? [],
})
const NONE = { rows: [], counters: [], notifications: [], deleteNotificationsFor: [] }

describe('app.bsky.actor.profile', () => {
  afterEach(() => {
    vi.useRealTimers()
  })

  it('refuses a record that is not a profile', () => {
    expect(() => record({ displayName: 5 })).toThrow()
    expect(() => record({ displayName: 'x'.repeat(65) })).toThrow()
    // A blob given the old way (a cid string) is not a blob to the lexicon.
    expect(() => record({ avatar: { cid: AVATAR, mimeType: 'image/jpeg' } })).toThrow()
    expect(() => record({ joinedViaStarterPack: { uri: PACK } })).toThrow()
    expect(() => record({ createdAt: 'yesterday' })).toThrow()
  })

  it('makes its row from the record, createdAt kept exactly as written', () => {
    const rec = record({
      displayName: 'Alice',
      description: 'hello',
      avatar: blob(AVATAR),
      banner: blob(BANNER),
      joinedViaStarterPack: { uri: PACK, cid: CID },
      // The stock does not index the pinned post; it is read from `record`.
      pinnedPost: { uri: PINNED, cid: CID },
      createdAt: '2026-03-01T12:00:00+01:00',
    })
    expect(profile.toRow(new MemoryReader(), ref(), rec)).toEqual({
      uri: URI,
      cid: CID,
      creator: ALICE,
      displayName: 'Alice',
      description: 'hello',
      avatarCid: AVATAR,
      bannerCid: BANNER,
      joinedViaStarterPackUri: PACK,
      createdAt: '2026-03-01T12:00:00+01:00',
      indexedAt: INDEXED,
    })
  })

  it('stamps a profile without createdAt with the wall clock, not the event time', () => {
    vi.useFakeTimers({ now: new Date('2026-04-02T08:30:00.000Z') })
    expect(profile.toRow(new MemoryReader(), ref(), record())).toEqual({
      uri: URI,
      cid: CID,
      creator: ALICE,
      createdAt: '2026-04-02T08:30:00.000Z',
      indexedAt: INDEXED,
    })
  })

  it('keeps a profile at another rkey in `record` only', () => {
    const other = `at://${ALICE}/app.bsky.actor.profile/3kother00001`
    const rec = record({ displayName: 'Alice' })
    // Not dropped: the stock still writes its `record` row.
    expect(() => profile.check?.(ref(other), rec)).not.toThrow()
    expect(profile.toRow(new MemoryReader(), ref(other), rec)).toBeNull()
  })

  it('tells the creator of the starter pack it was joined through, at the indexing time', () => {
    const rec = record({
      joinedViaStarterPack: { uri: PACK, cid: CID },
      createdAt: '2026-03-01T11:00:00.000Z',
    })
    const row = stored({ joinedViaStarterPackUri: PACK })
    expect(all(profile.onInsert(new MemoryReader(), row, ref(), rec))).toEqual({
      ...NONE,
      notifications: [
        {
          did: BOB,
          author: ALICE,
          recordUri: URI,
          recordCid: CID,
          reason: 'starterpack-joined',
          reasonSubject: PACK,
          sortAt: INDEXED,
        },
      ],
    })
  })

  it('tells the joiner too when the pack is their own, and nobody when there is no pack', () => {
    const own = `at://${ALICE}/app.bsky.graph.starterpack/3kpack000002`
    const rec = record({ joinedViaStarterPack: { uri: own, cid: CID } })
    const row = stored({ joinedViaStarterPackUri: own })
    const effects = profile.onInsert(new MemoryReader(), row, ref(), rec)
    expect(effects.notifications?.map((n) => [n.did, n.reasonSubject])).toEqual([[ALICE, own]])
    const plain = record({ displayName: 'Alice' })
    const plainRow = stored({ displayName: 'Alice' })
    expect(all(profile.onInsert(new MemoryReader(), plainRow, ref(), plain))).toEqual(NONE)
  })

  it('takes nothing back when deleted or replaced: the join notification stays', () => {
    const rec = record({ joinedViaStarterPack: { uri: PACK, cid: CID } })
    const row = stored({ joinedViaStarterPackUri: PACK })
    expect(all(profile.onDelete(new MemoryReader(), row, null))).toEqual(NONE)
    expect(all(profile.onDelete(new MemoryReader(), row, row, rec))).toEqual(NONE)
  })
})

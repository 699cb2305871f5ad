import { lexParse } from '@atproto/lex-json'
import { describe, expect, it } from 'vitest'
import { MemoryReader, refAt } from '../memory-reader.ts'
import type { Effects } from '../types.ts'
import { feedGenerator } from './feed-generator.ts'

const ALICE = 'did:plc:alicealicealicealicealic'
const FEED_DID = 'did:web:feeds.example.com'
const CID = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
const AVATAR = 'bafkreialmh5tqdkgx2zlhb6e5o4mxuvzvogmbtyklzoyqtlci3higpvw2m'
const INDEXED = '2026-03-01T12:00:00.000Z'
const URI = `at://${ALICE}/app.bsky.feed.generator/cats`

/** A blob as a record decoded from the repo carries it: its ref a CID, not a string. */
const blob = (cid: string) =>
  lexParse(JSON.stringify({ $type: 'blob', ref: { $link: cid }, mimeType: 'image/png', size: 1 }))
const record = (extra: object = {}) =>
  feedGenerator.parse({
    $type: 'app.bsky.feed.generator',
    did: FEED_DID,
    displayName: 'Cats',
    createdAt: '2026-03-01T11:00:00.000Z',
    ...extra,
  })
const ref = (uri = URI) => refAt(uri, CID, INDEXED)
/** The row as stored: every column present, absent values NULL, the generated sortAt added. */
const STORED = {
  uri: URI,
  cid: CID,
  creator: ALICE,
  feedDid: FEED_DID,
  displayName: 'Cats',
  description: null,
  descriptionFacets: null,
  avatarCid: null,
  createdAt: '2026-03-01T11:00:00.000Z',
  indexedAt: INDEXED,
  sortAt: '2026-03-01T11:00:00.000Z',
}
/** Every kind of effect, an absent one as empty, so a stray effect fails the comparison. */
const all = (e: Effects) => ({
  rows: e.rows ?? [],
  counters: e.counters ?? [],
  notifications: e.notifications ?? [],
  deleteNotificationsFor: e.deleteNotificationsFor ?? [],
})
const NONE = { rows: [], counters: [], notifications: [], deleteNotificationsFor: [] }

describe('app.bsky.feed.generator', () => {
  it('refuses a record that is not a feed generator', () => {
    expect(() =>
      feedGenerator.parse({
        $type: 'app.bsky.feed.generator',
        displayName: 'Cats',
        createdAt: INDEXED,
      }),
    ).toThrow()
    expect(() => record({ did: 'not-a-did' })).toThrow()
    expect(() => record({ displayName: 'x'.repeat(25) })).toThrow()
    expect(() => record({ createdAt: 'yesterday' })).toThrow()
  })

  it('makes its row from the record, createdAt normalised as the stock stores it', () => {
    const rec = record({
      description: '#cats only',
      descriptionFacets: [
        {
          index: { byteStart: 0, byteEnd: 5 },
          features: [{ $type: 'app.bsky.richtext.facet#tag', tag: 'cats' }],
        },
      ],
      avatar: blob(AVATAR),
      // Kept in `record` only, as the stock does.
      acceptsInteractions: true,
      contentMode: 'app.bsky.feed.defs#contentModeVideo',
      createdAt: '2026-03-01T12:00:00+01:00',
    })
    expect(feedGenerator.toRow(new MemoryReader(), ref(), rec)).toEqual({
      uri: URI,
      cid: CID,
      creator: ALICE,
      feedDid: FEED_DID,
      displayName: 'Cats',
      description: '#cats only',
      descriptionFacets:
        '[{"index":{"byteStart":0,"byteEnd":5},"features":[{"$type":"app.bsky.richtext.facet#tag","tag":"cats"}]}]',
      avatarCid: AVATAR,
      createdAt: '2026-03-01T11:00:00.000Z',
      indexedAt: INDEXED,
    })
  })

  it('leaves absent fields unset, but stores an empty facet list as such', () => {
    expect(feedGenerator.toRow(new MemoryReader(), ref(), record())).toEqual({
      uri: URI,
      cid: CID,
      creator: ALICE,
      feedDid: FEED_DID,
      displayName: 'Cats',
      createdAt: '2026-03-01T11:00:00.000Z',
      indexedAt: INDEXED,
    })
    // The stock tests the list, not its length: `[]` is written as text.
    const empty = record({ descriptionFacets: [] })
    expect(feedGenerator.toRow(new MemoryReader(), ref(), empty)?.descriptionFacets).toBe('[]')
  })

  it('has no effects beyond its row, on insert or delete', () => {
    const rec = record()
    const row = STORED
    expect(all(feedGenerator.onInsert(new MemoryReader(), row, ref(), rec))).toEqual(NONE)
    expect(all(feedGenerator.onDelete(new MemoryReader(), row, null))).toEqual(NONE)
    expect(all(feedGenerator.onDelete(new MemoryReader(), row, row, rec))).toEqual(NONE)
  })
})

import { lexParse } from '@atproto/lex-json'
import { describe, expect, it } from 'vitest'
import { MemoryReader, refAt } from '../memory-reader.ts'
import { list } from './list.ts'

const ALICE = 'did:plc:alicealicealicealicealic'
const CID = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
const AVATAR_CID = 'bafkreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
const INDEXED = '2026-03-01T12:00:00.000Z'
const URI = `at://${ALICE}/app.bsky.graph.list/3klist000001`

/** Parsed from JSON, as records arrive: the avatar's ref becomes a CID. */
const record = (extra: object = {}) =>
  list.parse(
    lexParse(
      JSON.stringify({
        $type: 'app.bsky.graph.list',
        name: 'Friends',
        purpose: 'app.bsky.graph.defs#curatelist',
        createdAt: '2026-03-01T11:00:00.000Z',
        ...extra,
      }),
    ),
  )
const ref = (uri = URI) => refAt(uri, CID, INDEXED)
/** The row as stored: absent columns null, the generated sortAt added. */
const stored = () => ({
  uri: URI,
  cid: CID,
  creator: ALICE,
  name: 'Friends',
  purpose: 'app.bsky.graph.defs#curatelist',
  description: null,
  descriptionFacets: null,
  avatarCid: null,
  createdAt: '2026-03-01T11:00:00.000Z',
  indexedAt: INDEXED,
  sortAt: '2026-03-01T11:00:00.000Z',
})

describe('app.bsky.graph.list', () => {
  it('refuses a record that is not a list', () => {
    const base = { $type: 'app.bsky.graph.list', createdAt: INDEXED }
    expect(() => list.parse({ ...base, purpose: 'app.bsky.graph.defs#modlist' })).toThrow()
    expect(() =>
      list.parse({ ...base, name: '', purpose: 'app.bsky.graph.defs#modlist' }),
    ).toThrow()
    expect(() => list.parse({ ...base, name: 'Friends' })).toThrow()
    expect(() =>
      list.parse({
        ...base,
        name: 'Friends',
        purpose: 'app.bsky.graph.defs#modlist',
        avatar: 'avatar.png',
      }),
    ).toThrow()
  })

  it('makes its row from the record: facets as JSON, the avatar by its CID', () => {
    const facets = [
      {
        index: { byteStart: 0, byteEnd: 5 },
        features: [{ $type: 'app.bsky.richtext.facet#link', uri: 'https://example.com' }],
      },
    ]
    const rec = record({
      purpose: 'app.bsky.graph.defs#modlist',
      description: 'Hello there',
      descriptionFacets: facets,
      avatar: { $type: 'blob', ref: { $link: AVATAR_CID }, mimeType: 'image/png', size: 100 },
      createdAt: '2026-03-01T13:00:00+02:00',
    })
    expect(list.toRow(new MemoryReader(), ref(), rec)).toEqual({
      uri: URI,
      cid: CID,
      creator: ALICE,
      name: 'Friends',
      purpose: 'app.bsky.graph.defs#modlist',
      description: 'Hello there',
      descriptionFacets:
        '[{"index":{"byteStart":0,"byteEnd":5},"features":[{"$type":"app.bsky.richtext.facet#link","uri":"https://example.com"}]}]',
      avatarCid: AVATAR_CID,
      createdAt: '2026-03-01T11:00:00.000Z',
      indexedAt: INDEXED,
    })
  })

  it('leaves out what the record leaves out', () => {
    // Absent and undefined both reach the table as null.
    const row = list.toRow(new MemoryReader(), ref(), record())!
    const optional = [row.description, row.descriptionFacets, row.avatarCid]
    expect(optional.map((v) => v ?? null)).toEqual([null, null, null])
  })

  it('never duplicates another list: two lists of one name are both indexed', () => {
    expect(list.findDuplicate).toBeUndefined()
  })

  it('counts nothing and notifies nobody, created or deleted', () => {
    const row = stored()
    expect(list.onInsert(new MemoryReader(), row, ref(), record())).toEqual({})
    expect(list.onDelete(new MemoryReader(), row, null)).toEqual({})
    expect(list.onDelete(new MemoryReader(), row, row, record())).toEqual({})
  })
})

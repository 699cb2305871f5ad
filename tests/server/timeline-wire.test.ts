// GetTimeline's answer written straight into its gRPC frame must be what protobuf-es writes for
// the same page, byte for byte: for items given as strings (a page from Postgres) and for items
// written out of the store's members, whose uris are never made as strings.
import { describe, expect, it } from 'vitest'
import { GetTimelineResponse } from '@openplane/proto'
import { feedItemBytes, timelineFrame } from '@openplane/server'
import { encodeMember, memberUris, MemberItems, seededRandom } from '@openplane/timelines'

/** The frame's message must equal protobuf-es's encoding of the same page. */
function expectFrame(
  frame: Buffer,
  page: { items: { uri: string; repost: string }[]; cursor: string },
) {
  const expected = new GetTimelineResponse(page).toBinary()
  expect(frame[0]).toBe(0)
  expect(frame.readUInt32BE(1)).toBe(expected.length)
  expect(frame.length).toBe(5 + expected.length)
  expect(Buffer.from(frame.subarray(5)).equals(Buffer.from(expected))).toBe(true)
}

describe('the timeline frame', () => {
  it('writes items given as strings as protobuf-es does', () => {
    const strings = ['', 'at://did:plc:abc/app.bsky.feed.post/1', 'é✓', 'x'.repeat(200)]
    // Frames share slabs: each must still hold its own page after the others are written.
    const kept: [Buffer, { items: { uri: string; repost: string }[]; cursor: string }][] = []
    for (let trial = 0; trial < 400; trial++) {
      const pick = (i: number) => strings[(trial * 7 + i * 13) % strings.length]!
      const items = Array.from({ length: trial % 60 }, (_, i) => ({
        uri: pick(i) + String(i),
        repost: i % 3 ? '' : pick(i + 1),
      }))
      const page = { items, cursor: trial % 4 ? `${trial}__bafy` : '' }
      const frame = timelineFrame({ items: feedItemBytes(items), cursor: page.cursor })
      expectFrame(frame, page)
      kept.push([frame, page])
    }
    for (const [frame, page] of kept) expectFrame(frame, page)
  })

  it("writes the store's members as the uris memberUris makes, byte for byte", () => {
    const random = seededRandom(14)
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!
    const b32 = 'abcdefghijklmnopqrstuvwxyz234567'
    const word = (n: number, alphabet = b32) =>
      Array.from({ length: n }, () => pick([...alphabet])).join('')
    // Every form a stored uri takes: a did:plc (compacted to its id), another DID (kept whole),
    // a did:plc that is not base32 (kept whole), a uri of another collection (verbatim).
    const did = () =>
      pick([
        () => `did:plc:${word(24)}`,
        () => `did:web:${word(1 + Math.floor(random() * 30))}.example.com`,
        () => `did:plc:${word(5)}X${word(3)}`,
        () => `did:key:z${word(40)}`,
      ])()
    const uri = (collection: string) =>
      random() < 0.1
        ? `at://${did()}/app.bsky.feed.generator/${word(13)}`
        : `at://${did()}/${collection}/${word(1 + Math.floor(random() * 15))}`
    for (let trial = 0; trial < 300; trial++) {
      const members = Array.from({ length: Math.floor(random() * 60) }, () =>
        encodeMember({
          uri: uri('app.bsky.feed.post'),
          cid: `bafyrei${word(52)}`,
          sortAt: new Date(1.7e12 + Math.floor(random() * 1e10)).toISOString(),
          ...(random() < 0.3 ? { repost: uri('app.bsky.feed.repost') } : {}),
        }),
      )
      // Fields encodeMember never writes (no slash): written as expandUri reads them.
      if (trial % 50 === 0)
        members.push('2024-01-01T00:00:00.000Z\x01c\x01noslash\x02r', 'a\x01b\x01did:x')
      const items = new MemberItems(members)
      expect(items.toArray()).toEqual(members.map(memberUris))
      const cursor = trial % 3 ? `${trial}__bafy` : ''
      expectFrame(timelineFrame({ items, cursor }), { items: items.toArray(), cursor })
    }
  })
})

// The pure pieces: the lossy rule, the page merge (against the server's mergeTimeline), the
// slices' merge, the member encoding and the stock cursor.
import { describe, expect, it } from 'vitest'
import {
  cursorOf,
  decodeMember,
  encodeMember,
  feedRowFromItem,
  itemFromFeedRow,
  lossyKeep,
  memberCursor,
  memberUris,
  mergeHome,
  seededRandom,
  type TimelineItem,
} from '@openplane/timelines'
import { mergeTimeline } from '../../packages/server/src/routes/util/timeline-sql.ts'
import { encodeTimeKey } from '../../packages/server/src/routes/util/pagination.ts'
import { mergeSlices } from '../../packages/timelines/src/slices.ts'
import { did, post, randomCid, repost, stockPage } from './behaviour.ts'

describe('lossyKeep', () => {
  const never = (): number => {
    throw new Error('no draw needed')
  }

  it('keeps every write for readers at or under the limit, without drawing', () => {
    expect(lossyKeep(0, 2000, never)).toBe(true)
    expect(lossyKeep(2000, 2000, never)).toBe(true)
    expect(lossyKeep(5000, Infinity, never)).toBe(true)
  })

  it('keeps a write with probability limit / follows (fixed seed)', () => {
    const n = 200_000
    for (const [follows, limit] of [
      [4000, 2000],
      [8000, 2000],
      [100_000, 2000],
      [2001, 2000],
    ] as const) {
      const rand = seededRandom(follows)
      let kept = 0
      for (let i = 0; i < n; i++) if (lossyKeep(follows, limit, rand)) kept++
      const p = limit / follows
      const sigma = Math.sqrt((p * (1 - p)) / n)
      expect(Math.abs(kept / n - p), `${follows} follows`).toBeLessThan(5 * sigma + 1e-9)
    }
  })

  it('with one draw per fan-out page (as Bluesky does), lower factors keep only when higher ones do', () => {
    const rand = seededRandom(7)
    for (let i = 0; i < 1000; i++) {
      const r = rand()
      const keeps = [2500, 4000, 8000, 50_000].map((f) => lossyKeep(f, 2000, () => r))
      expect(keeps).toEqual([...keeps].sort((a, b) => Number(b) - Number(a)))
    }
  })

  it('draws reproducibly and uniformly from a seed', () => {
    const a = seededRandom(99)
    const b = seededRandom(99)
    expect(Array.from({ length: 5 }, a)).toEqual(Array.from({ length: 5 }, b))
    const rand = seededRandom(12345)
    const buckets = new Array<number>(10).fill(0)
    const n = 100_000
    for (let i = 0; i < n; i++) buckets[Math.floor(rand() * 10)]!++
    const chi2 = buckets.reduce((sum, o) => sum + (o - n / 10) ** 2 / (n / 10), 0)
    expect(chi2).toBeLessThan(27.9) // 9 degrees of freedom, p = 0.001
  })
})

describe('mergeHome', () => {
  const reader = did('reader')
  const rand = seededRandom(2024)
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!
  const T0 = Date.parse('2024-05-01T12:00:00.000Z')
  const at = (): string => new Date(T0 + Math.floor(rand() * 40)).toISOString()
  const members = (items: readonly TimelineItem[]) => items.map(encodeMember)

  it("equals the server's mergeTimeline, wherever the followed rows come from", () => {
    for (let round = 0; round < 400; round++) {
      const authors = ['a', 'b', 'c', 'd'].map(did)
      const followed: TimelineItem[] = Array.from({ length: Math.floor(rand() * 40) }, () =>
        rand() < 0.2
          ? repost(pick(authors), post(pick(authors), at()), at())
          : post(pick(authors), at()),
      )
      const own = Array.from({ length: Math.floor(rand() * 25) }, () => post(reader, at()))
      if (rand() < 0.2) followed.push(...own.slice(0, 3)) // the reader follows themselves
      // An own item with a followed item's (sortAt, cid): the stock keeps the followed one first.
      const twin = followed.length && rand() < 0.3 ? pick(followed) : undefined
      if (twin) own.push(post(reader, twin.sortAt, twin.cid))
      const limit = pick([1, 2, 3, 5, 9, 10, 11, 30, 50])
      const all = [...followed, ...own]
      const cursor = rand() < 0.5 || !all.length ? '' : cursorOf(pick(all))
      const followedRows = stockPage(followed, limit + 1, cursor)
      const ownRows = stockPage(own, limit + 1, cursor)

      const stock = mergeTimeline(
        followedRows.map(feedRowFromItem),
        ownRows.map(feedRowFromItem),
        limit,
      )
      // Split the followed rows between the stored timeline and celebrity lists, with overlap.
      const timeline = followedRows.filter(() => rand() < 0.7)
      const celebrities = followedRows.filter((x) => !timeline.includes(x) || rand() < 0.2)
      const ours = mergeHome({
        timeline: members(timeline),
        celebrities: members(celebrities),
        own: members(ownRows),
        limit,
      })
      expect(
        { items: ours.members.map(memberUris), cursor: ours.cursor },
        `round ${round}`,
      ).toEqual(stock)
    }
  })

  it('ends with an empty cursor when the page is exactly filled, as the stock does', () => {
    const items = members(
      Array.from({ length: 3 }, (_, i) => post(did('a'), new Date(T0 + i).toISOString())),
    ).reverse()
    expect(mergeHome({ timeline: items, celebrities: [], own: [], limit: 3 }).cursor).toBe('')
    const more = mergeHome({ timeline: items, celebrities: [], own: [], limit: 2 })
    expect(more.cursor).toBe(memberCursor(more.members[1]!))
    expect(more.cursor).toBe(cursorOf(decodeMember(more.members[1]!)))
    expect(mergeHome({ timeline: [], celebrities: [], own: [], limit: 5 })).toEqual({
      members: [],
      cursor: '',
    })
  })
})

describe('members and cursors', () => {
  it('round-trip items, and sort like (sortAt, cid) strings', () => {
    const rand = seededRandom(5)
    const items: TimelineItem[] = []
    for (let i = 0; i < 500; i++) {
      const sortAt = new Date(Date.UTC(2024, 0, 1) + Math.floor(rand() * 5)).toISOString()
      const cid = rand() < 0.1 ? randomCid().slice(0, 20) : randomCid() // differing lengths too
      const x = post(did('a'), sortAt, cid)
      items.push(rand() < 0.3 ? { ...repost(did('b'), x, sortAt), cid } : x)
    }
    for (const x of items) expect(decodeMember(encodeMember(x))).toEqual(x)
    const byMember = [...items].sort((a, b) => (encodeMember(a) > encodeMember(b) ? -1 : 1))
    const byStock = stockPage(items, items.length)
    expect(byMember.map((x) => [x.sortAt, x.cid])).toEqual(byStock.map((x) => [x.sortAt, x.cid]))
  })

  it("writes the stock's cursor and converts feed_item rows both ways", () => {
    const x = repost(
      did('b'),
      post(did('a'), '2024-05-01T12:00:00.000Z'),
      '2024-05-01T12:00:01.500Z',
    )
    expect(cursorOf(x)).toBe(encodeTimeKey(x.sortAt, x.cid))
    expect(cursorOf(x)).toBe(`${Date.parse('2024-05-01T12:00:01.500Z')}__${x.cid}`)
    expect(feedRowFromItem(x)).toEqual({
      uri: x.repost,
      cid: x.cid,
      postUri: x.uri,
      sortAt: x.sortAt,
    })
    expect(itemFromFeedRow(feedRowFromItem(x))).toEqual(x)
    const p = post(did('a'), '2024-05-01T12:00:00.000Z')
    expect(itemFromFeedRow(feedRowFromItem(p))).toEqual(p)
  })
})

describe('mergeSlices', () => {
  it('gives the newest members of many slices, each once, as sorting them all would', () => {
    const rand = seededRandom(5)
    const pool = Array.from({ length: 40 }, (_, i) => `m${String(i).padStart(3, '0')}`)
    for (let round = 0; round < 500; round++) {
      // Slices drawn from one pool, so members repeat across them; some empty, some alone; now
      // and then as many as a celebrity merge reads.
      const count = Math.floor(rand() * (round % 10 === 0 ? 40 : 6))
      const slices = Array.from({ length: count }, () => ({
        members: pool.filter(() => rand() < 0.3).reverse(),
        ghost: undefined,
      }))
      const limit = Math.floor(rand() * 30)
      const all = [...new Set(slices.flatMap((s) => s.members))].sort().reverse()
      expect(mergeSlices(slices, limit).members).toEqual(all.slice(0, limit))
    }
  })
})

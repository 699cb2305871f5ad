// The behaviour every TimelineStore must have, run against the in-process store, Redis and Redis
// Cluster. The reference for order and paging is the stock's GetTimeline: feed items by the
// (sortAt, cid) strings descending, pages resumed strictly below `<epoch-ms>__<cid>`.
import { describe, expect, it } from 'vitest'
import {
  cursorOf,
  decodeMember,
  seededRandom,
  type PageOptions,
  type TimelineItem,
  type TimelineStore,
  type TimelineStoreOptions,
} from '@openplane/timelines'
import { decodeTimeKey } from '../../packages/server/src/routes/util/pagination.ts'

export interface StoreFactory {
  /** A fresh, empty store (its own key prefix on Redis). */
  make(opts?: TimelineStoreOptions): Promise<TimelineStore>
}

// ---- fixtures ---------------------------------------------------------------------------------

const B32 = 'abcdefghijklmnopqrstuvwxyz234567'
const rand = seededRandom(20240501)
const b32 = (n: number): string =>
  Array.from({ length: n }, () => B32[Math.floor(rand() * 32)]).join('')

export const did = (name: string): string => `did:plc:${name.padEnd(24, 'a').slice(0, 24)}`
export const randomCid = (): string => `bafyrei${b32(52)}`
const rkey = (): string => `3k${b32(11)}`

export function post(author: string, sortAt: string, cid = randomCid()): TimelineItem {
  return { uri: `at://${author}/app.bsky.feed.post/${rkey()}`, sortAt, cid }
}

export function repost(reposter: string, subject: TimelineItem, sortAt: string): TimelineItem {
  const uri = `at://${reposter}/app.bsky.feed.repost/${rkey()}`
  return { uri: subject.uri, repost: uri, sortAt, cid: randomCid() }
}

const iso = (ms: number): string => new Date(ms).toISOString()
const T0 = Date.parse('2024-05-01T12:00:00.000Z')

/** The stock's comparator (feeds.ts getTimeline). */
function stockOrder(a: TimelineItem, b: TimelineItem): number {
  if (a.sortAt > b.sortAt) return -1
  if (a.sortAt < b.sortAt) return 1
  return a.cid > b.cid ? -1 : 1
}

/** The stock's page: rows strictly below the cursor (string tuple compare), newest first. */
export function stockPage(all: readonly TimelineItem[], rows: number, cursor = ''): TimelineItem[] {
  const at = decodeTimeKey(cursor)
  return all
    .filter((i) => !at || i.sortAt < at.time || (i.sortAt === at.time && i.cid < at.key))
    .sort(stockOrder)
    .slice(0, rows)
}

type Pager = (rows: number, cursor: string) => Promise<TimelineItem[]>

/** Walks pages of `limit` the stock's way (a cursor only when more rows exist). */
async function walk(pager: Pager, limit: number, maxPages = 60): Promise<string[][]> {
  const pages: string[][] = []
  let cursor = ''
  for (let i = 0; i < maxPages; i++) {
    const rows = await pager(limit + 1, cursor)
    const items = rows.slice(0, limit)
    pages.push([...items.map((x) => x.repost ?? x.uri), rows.length > limit ? 'more' : 'end'])
    if (rows.length <= limit) break
    cursor = cursorOf(items.at(-1)!)
  }
  return pages
}

const storePager =
  (store: TimelineStore, reader: string): Pager =>
  async (rows, cursor) => {
    const page = await store.page(reader, { limit: rows, before: decodeTimeKey(cursor) })
    expect(page?.complete).toBe(true)
    return page!.items
  }

const feedUris = (items: readonly TimelineItem[]): string[] => items.map((x) => x.repost ?? x.uri)

// ---- the suite --------------------------------------------------------------------------------

export function timelineStoreBehaviour(factory: () => StoreFactory): void {
  const make = (opts?: TimelineStoreOptions): Promise<TimelineStore> => factory().make(opts)
  const alice = did('alice')
  const bob = did('bob')
  const carol = did('carol')
  const celeb = did('celeb')

  describe('order and ties', () => {
    it('orders by (sortAt, cid) descending, equal milliseconds broken by cid', async () => {
      const store = await make({ targetLength: 1000 })
      await store.materialise('timeline', alice, [], { complete: true })
      // 200 items over 8 distinct milliseconds: most share their millisecond with others.
      const items = Array.from({ length: 200 }, (_, i) => {
        const at = iso(T0 + Math.floor(rand() * 8))
        return i % 5 === 0 ? repost(carol, post(bob, iso(T0 - 1000)), at) : post(bob, at)
      })
      for (const item of items) expect(await store.fanOut([alice], item)).toBe(1)
      const page = await store.page(alice, { limit: 1000 })
      expect(page).toEqual({ items: stockPage(items, 1000), complete: true })
      for (const limit of [1, 7, 50]) {
        expect(await walk(storePager(store, alice), limit)).toEqual(
          await walk(async (rows, cursor) => stockPage(items, rows, cursor), limit),
        )
      }
    })

    it('compares sortAt as the stock does, as strings: sub-ms digits, offsets, no fraction', async () => {
      const store = await make()
      const sortAts = [
        '2024-05-01T12:00:00.000Z',
        '2024-05-01T12:00:00.000Z',
        '2024-05-01T12:00:00.000500Z', // same ms, sorts below the plain form ('5' < 'Z')
        '2024-05-01T12:00:00Z', // same ms, sorts above it ('Z' > '.')
        '2024-05-01T13:00:00.000+01:00', // 12:00Z, but sorts as "13:00"
        '2024-05-01T12:00:00.001Z',
        '2024-05-01T11:59:59.999Z',
        '2024-05-01T11:30:00.000+00:00',
      ]
      const items = sortAts.map((s) => post(bob, s))
      await store.materialise('timeline', alice, items, { complete: true })
      const page = await store.page(alice, { limit: 100 })
      expect(feedUris(page!.items)).toEqual(feedUris(stockPage(items, 100)))
      for (const limit of [1, 2, 3]) {
        expect(await walk(storePager(store, alice), limit)).toEqual(
          await walk(async (rows, cursor) => stockPage(items, rows, cursor), limit),
        )
      }
    })

    it('keeps items with equal sortAt and cid apart, in the same order on every backend', async () => {
      const store = await make()
      const subject = post(carol, iso(T0 - 5000))
      const cid = randomCid() // identical repost records by two accounts share a cid
      const a = {
        ...repost(bob, subject, iso(T0)),
        cid,
        repost: `at://${bob}/app.bsky.feed.repost/3kaaaaaaaaaaa`,
      }
      const b = {
        ...repost(bob, subject, iso(T0)),
        cid,
        repost: `at://${carol}/app.bsky.feed.repost/3kaaaaaaaaaaa`,
      }
      await store.materialise('timeline', alice, [a], { complete: true })
      expect(await store.fanOut([alice], b)).toBe(1)
      expect(await store.fanOut([alice], b)).toBe(0) // the same item twice is one entry
      const page = await store.page(alice, { limit: 10 })
      expect(page!.items).toEqual([b, a]) // rest of the member: carol's did sorts above bob's
    })
  })

  describe('trimming', () => {
    it('keeps the newest targetLength items and knows where its knowledge ends', async () => {
      const store = await make({ targetLength: 5 })
      await store.materialise('timeline', alice, [], { complete: true })
      const items = Array.from({ length: 8 }, (_, i) => post(bob, iso(T0 + i * 1000)))
      for (const item of items) await store.fanOut([alice], item)
      const newest = stockPage(items, 5)
      expect(await store.page(alice, { limit: 5 })).toEqual({ items: newest, complete: true })
      // Asking past the kept items: what is there, and "go to Postgres for this page".
      expect(await store.page(alice, { limit: 6 })).toEqual({ items: newest, complete: false })
      const below = decodeTimeKey(cursorOf(newest[2]!))
      expect(await store.page(alice, { limit: 2, before: below })).toEqual({
        items: newest.slice(3),
        complete: true,
      })
      expect((await store.page(alice, { limit: 3, before: below }))!.complete).toBe(false)
      // A backdated item older than the trimmed horizon is not stored (the gap is unknown)...
      expect(await store.fanOut([alice], post(bob, iso(T0 - 60_000)))).toBe(0)
      // ...one inside the kept window is, and pushes the oldest out.
      const late = post(bob, iso(T0 + 4500))
      expect(await store.fanOut([alice], late)).toBe(1)
      const page = await store.page(alice, { limit: 5 })
      expect(page!.items).toEqual(stockPage([...newest, late], 5))
      expect(await store.memoryStats([alice])).toMatchObject({ sample: { lists: 1, entries: 5 } })
    })

    it('lets a long list grow by a sixteenth before trimming it back to targetLength', async () => {
      const store = await make({ targetLength: 32 })
      await store.materialise('timeline', alice, [], { complete: true })
      const items = Array.from({ length: 35 }, (_, i) => post(bob, iso(T0 + i)))
      for (const item of items.slice(0, 34)) await store.fanOut([alice], item)
      expect(await store.page(alice, { limit: 40 })).toEqual({
        items: stockPage(items.slice(0, 34), 34),
        complete: true,
      })
      await store.fanOut([alice], items[34]!)
      expect(await store.page(alice, { limit: 40 })).toEqual({
        items: stockPage(items, 32),
        complete: false,
      })
    })

    it('trims a rebuild to targetLength, and a bounded rebuild keeps its last row as the horizon', async () => {
      const store = await make({ targetLength: 3 })
      const items = Array.from({ length: 6 }, (_, i) => post(bob, iso(T0 + i)))
      await store.materialise('timeline', alice, items, { complete: true })
      expect(await store.page(alice, { limit: 4 })).toEqual({
        items: stockPage(items, 3),
        complete: false,
      })
      // Two rows of a LIMIT 2 read: one kept, the older one marks the horizon.
      await store.materialise('timeline', bob, stockPage(items, 2), { complete: false })
      expect(await store.page(bob, { limit: 1 })).toEqual({
        items: stockPage(items, 1),
        complete: true,
      })
      expect(await store.page(bob, { limit: 2 })).toEqual({
        items: stockPage(items, 1),
        complete: false,
      })
      await expect(store.materialise('timeline', carol, [], { complete: false })).rejects.toThrow(
        RangeError,
      )
    })
  })

  describe('fan-out and materialisation', () => {
    it('writes only to materialised readers, and a rebuild keeps writes made while it ran', async () => {
      const store = await make()
      const readers = Array.from({ length: 30 }, (_, i) => did(`reader${i}`))
      const warm = readers.filter((_, i) => i % 3 === 0)
      for (const r of warm) await store.materialise('timeline', r, [], { complete: true })
      const first = post(bob, iso(T0))
      expect(await store.fanOut(readers, first)).toBe(warm.length)
      expect(await store.page(readers[1]!, { limit: 10 })).toBeNull()
      expect(await store.isMaterialised(readers[1]!)).toBe(false)

      // A rebuild: start collecting, read "Postgres", a write lands meanwhile, materialise.
      const cold = readers[1]!
      await store.startRebuild('timeline', cold)
      expect(await store.isMaterialised(cold)).toBe(false)
      expect(await store.page(cold, { limit: 10 })).toBeNull()
      const during = post(bob, iso(T0 + 10))
      expect(await store.fanOut([cold], during)).toBe(1)
      const older = post(carol, iso(T0 - 10))
      await store.materialise('timeline', cold, [first, older], { complete: true })
      expect(await store.isMaterialised(cold)).toBe(true)
      expect(await store.page(cold, { limit: 10 })).toEqual({
        items: [during, first, older],
        complete: true,
      })

      // materialise on a ready timeline replaces it.
      await store.materialise('timeline', cold, [older], { complete: true })
      expect((await store.page(cold, { limit: 10 }))!.items).toEqual([older])

      expect(await store.insert(cold, [first, during])).toBe(2)
      expect((await store.page(cold, { limit: 10 }))!.items).toEqual([during, first, older])
      expect(await store.insert(readers[2]!, [first])).toBe(0)

      await store.evict([cold])
      expect(await store.isMaterialised(cold)).toBe(false)
    })

    it('removes items by feed uri, by exact item, and by originator', async () => {
      const store = await make()
      const p1 = post(bob, iso(T0))
      const p2 = post(bob, iso(T0 + 1))
      const p3 = post(carol, iso(T0 + 2))
      const rp = repost(carol, p1, iso(T0 + 3)) // carol reposts bob's p1
      const rb = repost(bob, p3, iso(T0 + 4)) // bob reposts carol's p3
      for (const r of [alice, carol]) {
        await store.materialise('timeline', r, [p1, p2, p3, rp, rb], { complete: true })
      }
      // Deleting p1 removes the post's own item; the repost of it stays, as feed_item rows do.
      expect(await store.remove([alice, carol, did('nobody')], p1.uri)).toBe(2)
      expect(feedUris((await store.page(alice, { limit: 10 }))!.items)).toEqual(
        feedUris([rb, rp, p3, p2]),
      )
      expect(await store.remove([alice], rp.repost!)).toBe(1)
      expect(await store.remove([alice], p2)).toBe(1)
      expect(await store.remove([alice], p2)).toBe(0)
      expect(feedUris((await store.page(alice, { limit: 10 }))!.items)).toEqual(feedUris([rb, p3]))
      // Unfollowing bob: his posts and his reposts go, carol's post stays.
      expect(await store.removeOriginator([carol], bob)).toBe(2)
      expect(feedUris((await store.page(carol, { limit: 10 }))!.items)).toEqual(feedUris([rp, p3]))
    })

    it('round-trips uris it cannot compact', async () => {
      const store = await make()
      const odd = [
        {
          uri: 'at://did:web:example.com/app.bsky.feed.post/3kabc',
          sortAt: iso(T0),
          cid: randomCid(),
        },
        { uri: 'at://did:plc:UPPER/app.bsky.feed.post/x', sortAt: iso(T0 + 1), cid: randomCid() },
        {
          uri: 'at://did:plc:aaaaaaaaaaaaaaaaaaaaaaaa/com.example.thing/x',
          repost: 'at://did:web:example.com/app.bsky.feed.repost/3kx',
          sortAt: iso(T0 + 2),
          cid: randomCid(),
        },
      ]
      await store.materialise('timeline', alice, odd, { complete: true })
      expect((await store.page(alice, { limit: 10 }))!.items).toEqual([...odd].reverse())
      expect(await store.removeOriginator([alice], 'did:web:example.com')).toBe(2)
    })
  })

  describe('celebrity lists', () => {
    it('are materialised like timelines, trimmed, and merged across authors', async () => {
      const store = await make({ authorTargetLength: 4 })
      const other = did('celebtwo')
      const item = post(celeb, iso(T0))
      expect(await store.pushAuthorRecent(celeb, item)).toBe(false)
      expect(await store.authorRecent([celeb], { limit: 5 })).toEqual({
        items: [],
        complete: false,
        missing: [celeb],
      })
      await store.materialise('author', celeb, [item], { complete: true })
      await store.startRebuild('author', other)
      const early = post(other, iso(T0 + 3))
      expect(await store.pushAuthorRecent(other, early)).toBe(true)
      await store.materialise('author', other, [], { complete: true })

      const mine = Array.from({ length: 5 }, (_, i) => post(celeb, iso(T0 + 10 + i * 2)))
      const theirs = Array.from({ length: 3 }, (_, i) => post(other, iso(T0 + 11 + i * 2)))
      for (const x of mine) expect(await store.pushAuthorRecent(celeb, x)).toBe(true)
      for (const x of theirs) await store.pushAuthorRecent(other, x)
      // celeb kept 4 of its 6; other holds all 4 of its own.
      const kept = [...stockPage([item, ...mine], 4), early, ...theirs]
      const merged = await store.authorRecent([celeb, other, celeb], { limit: 6 })
      expect(merged).toEqual({ items: stockPage(kept, 6), complete: true, missing: [] })
      // Past celeb's horizon the merge cannot be exact any more.
      expect((await store.authorRecent([celeb, other], { limit: 8 })).complete).toBe(false)
      const before = decodeTimeKey(cursorOf(merged.items[3]!))
      expect(await store.authorRecent([other], { limit: 5, before })).toEqual({
        items: stockPage(kept, 8).filter((x) => x.uri.includes(other) && x.sortAt < before!.time),
        complete: true,
        missing: [],
      })
      // Read down to a floor only: nothing older comes back, and a floor above celeb's horizon
      // makes the short read exact; one below it does not.
      const floor = kept.sort(stockOrder)[2]!
      expect(await store.authorRecent([celeb, other], { limit: 8, atLeast: floor })).toEqual({
        items: stockPage(kept, 3),
        complete: true,
        missing: [],
      })
      const low = stockPage(kept, 8).at(-1)!
      expect((await store.authorRecent([celeb, other], { limit: 8, atLeast: low })).complete).toBe(
        false,
      )
      expect(await store.removeAuthorRecent(other, early.uri)).toBe(1)
      expect(await store.removeAuthorRecent(other, theirs[0]!)).toBe(1)
    })
  })

  describe('a home page in one read', () => {
    it('reads the timeline, own and celebrity lists exactly as the single-list reads do', async () => {
      const store = await make({ targetLength: 6, authorTargetLength: 4 })
      const other = did('celebtwo')
      const composed = async (reader: string, celebs: string[], opts: PageOptions) => {
        const timeline = await store.page(reader, opts)
        if (!timeline || !celebs.length) {
          return { timeline, own: await store.authorRecent([reader], opts), celebrities: undefined }
        }
        // With celebrities, the own list is read down to their floor too.
        const full = timeline.items.length === opts.limit
        const atLeast = full ? timeline.items.at(-1) : undefined
        return {
          timeline,
          own: await store.authorRecent([reader], { ...opts, atLeast }),
          celebrities: await store.authorRecent(celebs, { ...opts, atLeast }),
        }
      }
      // home answers members; decoded, they are what the single-list reads give.
      const items = <T extends { members: string[] }>({ members, ...rest }: T) => ({
        items: members.map(decodeMember),
        ...rest,
      })
      const same = async (reader: string, celebs: string[], opts: PageOptions) => {
        const read = await store.home(reader, celebs, opts)
        const got = {
          timeline: read.timeline && items(read.timeline),
          own: items(read.own),
          celebrities: read.celebrities && items(read.celebrities),
        }
        expect(got).toEqual(await composed(reader, celebs, opts))
        return got
      }
      // Nothing materialised: no timeline, own list missing, celebrities not read.
      expect(await same(alice, [celeb], { limit: 3 })).toEqual({
        timeline: null,
        own: { items: [], complete: false, missing: [alice] },
        celebrities: undefined,
      })
      const followed = Array.from({ length: 8 }, (_, i) => post(bob, iso(T0 + i * 10)))
      const mine = Array.from({ length: 6 }, (_, i) => post(alice, iso(T0 + 5 + i * 10)))
      const starred = Array.from({ length: 6 }, (_, i) => post(celeb, iso(T0 + 3 + i * 13)))
      const theirs = Array.from({ length: 2 }, (_, i) => post(other, iso(T0 + 7 + i * 31)))
      // A bounded rebuild of 7 rows keeps 6 and a horizon; celeb's list keeps its newest 4.
      const token = await store.startRebuild('timeline', alice)
      await store.materialise('timeline', alice, stockPage(followed, 7), { complete: false, token })
      await store.materialise('author', alice, mine, { complete: true })
      await store.materialise('author', celeb, starred, { complete: true })
      // Own list present, one celebrity missing: reported, the others read.
      const partial = await same(alice, [celeb, other], { limit: 3 })
      expect(partial.celebrities?.missing).toEqual([other])
      await store.materialise('author', other, theirs, { complete: true })
      // A full timeline page: the celebrities read only down to its last item.
      const full = await same(alice, [celeb, other, celeb], { limit: 3 })
      expect(full.timeline).toEqual({ items: stockPage(followed, 3), complete: true })
      const floor = stockPage(followed, 3).at(-1)!
      // The own list too: of its newest 3, only those at or above the floor.
      const ownAbove = stockPage(mine, 3).filter((x) => stockOrder(x, floor) <= 0)
      expect(ownAbove.length).toBe(1)
      expect(full.own).toEqual({ items: ownAbove, complete: true, missing: [] })
      expect(full.celebrities).toEqual({
        items: stockPage([...starred, ...theirs], 3).filter((x) => stockOrder(x, floor) <= 0),
        complete: true,
        missing: [],
      })
      // Past the timeline's horizon, after a cursor, no celebrities, and an empty own list.
      await same(alice, [celeb, other], { limit: 8 })
      const before = decodeTimeKey(cursorOf(stockPage(followed, 8)[4]!))
      await same(alice, [celeb, other], { limit: 3, before })
      // A cursor below the timeline's horizon: nothing there is known, though nothing is stored.
      const past = decodeTimeKey(cursorOf(stockPage(followed, 8)[6]!))
      expect((await same(alice, [celeb, other], { limit: 3, before: past })).timeline).toEqual({
        items: [],
        complete: false,
      })
      await same(alice, [], { limit: 4 })
      await store.materialise('author', carol, [], { complete: true })
      const t2 = await store.startRebuild('timeline', carol)
      await store.materialise('timeline', carol, [], { complete: true, token: t2 })
      expect(await same(carol, [other], { limit: 2 })).toEqual({
        timeline: { items: [], complete: true },
        own: { items: [], complete: true, missing: [] },
        celebrities: { items: stockPage(theirs, 2), complete: true, missing: [] },
      })
    })
  })

  describe('hibernation', () => {
    it('tracks activity and evicts the timelines of inactive readers', async () => {
      const store = await make()
      // materialise records activity now; these touches are later still.
      const now = Date.now()
      for (const [r, at] of [
        [alice, now + 1000],
        [bob, now + 2000],
        [carol, now + 3000],
      ] as const) {
        await store.materialise('timeline', r, [post(celeb, iso(T0))], { complete: true })
        await store.touch(r, at)
      }
      await store.touch(alice, now) // never moves backwards
      expect((await store.activeSince(now + 1500)).sort()).toEqual([bob, carol].sort())
      expect((await store.activeSince(0)).length).toBe(3)
      expect(await store.evictInactive(now + 2500)).toBe(2)
      expect(await store.isMaterialised(alice)).toBe(false)
      expect(await store.isMaterialised(bob)).toBe(false)
      expect(await store.isMaterialised(carol)).toBe(true)
      expect(await store.activeSince(0)).toEqual([carol])
      expect(await store.fanOut([alice, bob, carol], post(celeb, iso(T0 + 1)))).toBe(1)
      expect(await store.evictInactive(now + 2500)).toBe(0)
      const stats = await store.memoryStats([alice, carol])
      expect(stats.activeReaders).toBe(1)
      expect(stats.sample).toMatchObject({ lists: 1, entries: 2 })
      expect(stats.sample.bytes).toBeGreaterThan(0)
      expect(stats.usedBytes).toBeGreaterThan(0)
    })
  })

  describe('shared by many servers', () => {
    it('a rebuild holds its list: another start is refused until it ends or its lease runs out', async () => {
      const store = await make()
      const token = await store.startRebuild('timeline', alice)
      expect(token).toBeTypeOf('string')
      expect(await store.startRebuild('timeline', alice)).toBeUndefined()
      expect(await store.hasList(alice)).toBe(true)
      expect(await store.isMaterialised(alice)).toBe(false)
      const x = post(bob, iso(T0))
      expect(
        await store.materialise('timeline', alice, [x], { complete: true, token: 'another' }),
      ).toBe(false)
      expect(await store.materialise('timeline', alice, [x], { complete: true, token })).toBe(true)
      expect((await store.page(alice, { limit: 5 }))!.items).toEqual([x])
      // Ended: the next rebuild may start; one whose lease ran out loses its list to the next.
      const short = await store.startRebuild('timeline', alice, 50)
      expect(short).toBeTypeOf('string')
      await new Promise((r) => setTimeout(r, 120))
      const next = await store.startRebuild('timeline', alice)
      expect(next).toBeTypeOf('string')
      expect(
        await store.materialise('timeline', alice, [x], { complete: true, token: short }),
      ).toBe(false)
      expect(await store.page(alice, { limit: 5 })).toBeNull()
      // A failed rebuild gives its lease back.
      await store.abandonRebuild('timeline', alice, next!)
      expect(await store.hasList(alice)).toBe(false)
      expect(await store.startRebuild('timeline', alice)).toBeTypeOf('string')
    })

    it('a removal or an eviction reaching a list under rebuild cancels the rebuild', async () => {
      const store = await make()
      const x = post(bob, iso(T0))
      const cancels: [string, (r: string) => Promise<unknown>][] = [
        ['remove by uri', (r) => store.remove([r], x.uri)],
        ['remove exact', (r) => store.remove([r], x)],
        ['remove by originator', (r) => store.removeOriginator([r], carol)],
        ['evict', (r) => store.evict([r])],
      ]
      for (const [what, cancel] of cancels) {
        const token = await store.startRebuild('timeline', alice)
        expect(await store.fanOut([alice], post(carol, iso(T0 + 5)))).toBe(1)
        await cancel(alice)
        const done = await store.materialise('timeline', alice, [x], { complete: true, token })
        expect({ what, done, page: await store.page(alice, { limit: 5 }) }).toEqual({
          what,
          done: false,
          page: null,
        })
      }
      // Fan-out writes do not cancel; ready lists are not dropped by a removal.
      const token = await store.startRebuild('timeline', alice)
      await store.fanOut([alice], post(carol, iso(T0 + 6)))
      expect(await store.materialise('timeline', alice, [x], { complete: true, token })).toBe(true)
      await store.remove([alice], x)
      expect((await store.page(alice, { limit: 5 }))!.items.length).toBe(1)
      // An author's list alike.
      const seed = await store.startRebuild('author', celeb)
      expect(await store.startRebuild('author', celeb)).toBeUndefined()
      await store.removeAuthorRecent(celeb, x.uri)
      expect(await store.materialise('author', celeb, [x], { complete: true, token: seed })).toBe(
        false,
      )
      expect((await store.authorRecent([celeb], { limit: 5 })).missing).toEqual([celeb])
    })

    it('logs activations in order, and keeps the readers in the activity index', async () => {
      const store = await make()
      const { next } = await store.activations(undefined)
      await store.startRebuild('timeline', bob)
      await store.startRebuild('timeline', carol)
      expect(await store.startRebuild('timeline', bob)).toBeUndefined() // refused: not logged again
      const got = await store.activations(next)
      expect(got).toMatchObject({ readers: [bob, carol], gap: false })
      expect(await store.activations(got.next)).toMatchObject({ readers: [], gap: false })
      expect((await store.activeSince(0)).sort()).toEqual([bob, carol].sort())
    })

    it('gives a named lease to one caller at a time, for its duration', async () => {
      const store = await make()
      expect(await store.tryLease('pass', 100)).toBe(true)
      expect(await store.tryLease('pass', 100)).toBe(false)
      expect(await store.tryLease('other', 100)).toBe(true)
      await new Promise((r) => setTimeout(r, 150))
      expect(await store.tryLease('pass', 100)).toBe(true)
    })
  })

  describe('limits and input', () => {
    it('answers empty pages for zero limits and rejects unusable input', async () => {
      const store = await make()
      await store.materialise('timeline', alice, [post(bob, iso(T0))], { complete: true })
      expect(await store.page(alice, { limit: 0 })).toEqual({ items: [], complete: true })
      await expect(store.fanOut(['did:plc:{x}'], post(bob, iso(T0)))).rejects.toThrow(TypeError)
      await expect(
        store.fanOut([alice], { ...post(bob, iso(T0)), cid: 'bad\ncid' }),
      ).rejects.toThrow(TypeError)
    })
  })
}

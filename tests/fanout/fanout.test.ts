// The fan-out write side on its own: committed changes (as the indexer's writer hands them over)
// applied to a real graph over Postgres and the in-process timeline store. The lossy rule, the
// celebrity route and its end, hibernation, and backfill on follow.
import { createPgDb, migrateToLatest, type Db } from '@openplane/db'
import { Celebrities, FanOut, HomeTimelines, type FeedSource } from '@openplane/fanout'
import { Graph } from '@openplane/graph'
import type { Change } from '@openplane/ingest'
import { followedItems, ownItems } from '@openplane/server'
import { loopLagMaxMs, Overloaded, registry } from '@openplane/telemetry'
import {
  MemoryTimelineStore,
  TimelineStoreUnavailable,
  TimeoutError,
  type HomeRead,
  type TimelineItem,
} from '@openplane/timelines'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { dropSchemas } from '../harness/stock-network.ts'
import { did, followRow, storedPost } from './fixtures.ts'

/**
 * The in-process store with faults on demand: the next fan-out write fails (as one that passed
 * its deadline does), and optionally the evictions after it too (the store really away).
 */
class FaultyStore extends MemoryTimelineStore {
  failNextFanOut = false
  failEvictions = false
  /** Home reads time out, as when their answer comes (or is read) after the deadline. */
  lateHomes = false

  override async home(...args: Parameters<MemoryTimelineStore['home']>): Promise<HomeRead> {
    if (this.lateHomes) {
      throw new TimelineStoreUnavailable('home', new TimeoutError('no answer within 500 ms'))
    }
    return super.home(...args)
  }

  override async fanOut(readers: readonly string[], item: TimelineItem): Promise<number> {
    if (this.failNextFanOut) {
      this.failNextFanOut = false
      // Part of it landed, as a write cut by its deadline may have.
      await super.fanOut(readers.slice(0, 1), item)
      throw new TimelineStoreUnavailable('fanOut', new Error('deadline passed'), readers)
    }
    return super.fanOut(readers, item)
  }

  override async evict(readers: readonly string[]): Promise<void> {
    if (this.failEvictions) throw new TimelineStoreUnavailable('evict', new Error('unreachable'))
    return super.evict(readers)
  }
}
const HOUR = 3600_000

describe('fan-out', () => {
  const schema = uniqueName('op_fanout')
  let db: Db
  let seq = 0
  let clock = 0

  beforeAll(async () => {
    db = createPgDb({ url: PG_URL, schema, poolSize: 2 })
    await migrateToLatest(db)
  })

  afterAll(async () => {
    await db?.close()
    await dropSchemas([schema])
  })

  function setup(opts: { celebrity?: number; lossy?: number; random?: () => number } = {}) {
    const graph = Graph.create(db)
    const store = new FaultyStore({ targetLength: 50, authorTargetLength: 50 })
    const source: FeedSource = {
      followed: (reader, rows) => followedItems(db.db, reader, undefined, rows),
      byAuthor: (author, rows) => ownItems(db.db, author, undefined, rows),
    }
    const home = new HomeTimelines(
      store,
      graph,
      new Celebrities(graph, opts.celebrity ?? Infinity),
      source,
      { activeWindowMs: HOUR },
    )
    const fanout = new FanOut(graph, home, source, {
      lossyFollowLimit: opts.lossy ?? Infinity,
      random: opts.random,
    })
    const commit = async (...changes: Change[]) => {
      fanout.onCommitted(changes, { source: 'test', cursor: ++seq })
      await fanout.idle()
    }
    const follow = (a: string, b: string): Change => ({
      table: 'follow',
      op: 'insert',
      row: followRow(a, b, String(seq)),
    })
    const unfollow = (a: string, b: string): Change => ({ ...follow(a, b), op: 'delete' })
    /** A post: its feed_item row in Postgres (what rebuilds read) and the change. */
    const post = (author: string) => storedPost(db, author, ++clock)
    /** Materialises a reader's timeline the way a first read does. */
    const activate = async (reader: string) => {
      await home.rebuild(did(reader))
      await home.seedAuthor(did(reader))
    }
    const uris = async (reader: string) =>
      ((await store.page(did(reader), { limit: 100 }))?.items ?? []).map((i) => i.uri)
    return { graph, store, source, home, fanout, commit, follow, unfollow, post, activate, uris }
  }

  const metric = async (name: string) => {
    const m = (await registry.getMetricsAsJSON()).find((x) => x.name === name)
    return m?.values.reduce((sum, v) => sum + v.value, 0) ?? 0
  }

  it('a store answer late because this process is busy refuses the read; only an idle process moves it to Postgres', async () => {
    const t = setup()
    await t.activate('la')
    const reads = async (path: string, reason: string) => {
      const m = (await registry.getMetricsAsJSON()).find(
        (x) => x.name === 'openplane_timeline_reads_total',
      )
      const v = m?.values.find((x) => x.labels.path === path && x.labels.reason === reason)
      return v?.value ?? 0
    }
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
    const read = () => t.home.read(did('la'), 10, undefined)
    expect(await read()).toBeDefined()
    loopLagMaxMs() // the monitor runs from here
    await sleep(50)
    const [refused, fallback] = [
      await reads('refused', 'overloaded'),
      await reads('postgres', 'unavailable'),
    ]
    // The process falls behind: a 300 ms turn, then the late answer.
    const until = performance.now() + 300
    while (performance.now() < until);
    await sleep(15)
    expect(loopLagMaxMs()).toBeGreaterThan(10)
    t.store.lateHomes = true
    await expect(read()).rejects.toBeInstanceOf(Overloaded)
    expect(await reads('refused', 'overloaded')).toBe(refused + 1)
    expect(await reads('postgres', 'unavailable')).toBe(fallback)
    // Nothing was paused: once answers come in time, the store serves again at once.
    t.store.lateHomes = false
    expect(await read()).toBeDefined()
    expect(await reads('postgres', 'unavailable')).toBe(fallback)
    // An idle process whose store answers late: the store is slow or away, Postgres answers.
    // (Once the last second held no late turn: waited for, since a busy machine may add one.)
    for (let i = 0; i < 100 && loopLagMaxMs() >= 10; i++) await sleep(100)
    expect(loopLagMaxMs()).toBeLessThan(10)
    t.store.lateHomes = true
    expect(await read()).toBeUndefined()
    expect(await reads('postgres', 'unavailable')).toBe(fallback + 1)
    t.store.lateHomes = false
  })

  it('fans a post out to materialised followers only', async () => {
    const t = setup()
    await t.commit(t.follow('fa', 'fz'), t.follow('fb', 'fz'))
    await t.activate('fa')
    const [change, row] = await t.post('fz')
    await t.commit(change)
    expect(await t.uris('fa')).toEqual([row.uri])
    expect(await t.store.isMaterialised(did('fb'))).toBe(false)
  })

  it('a new follow brings the followee’s items; an unfollow takes them away', async () => {
    const t = setup()
    const [c1, p1] = await t.post('ny')
    await t.commit(c1)
    await t.activate('na')
    expect(await t.uris('na')).toEqual([])
    await t.commit(t.follow('na', 'ny'))
    expect(await t.uris('na')).toEqual([p1.uri])
    await t.commit(t.unfollow('na', 'ny'))
    expect(await t.uris('na')).toEqual([])
  })

  it('lossy: a reader following more than the limit gets writes with probability limit/follows', async () => {
    // ld follows three accounts, limit 2: keep when the draw is below 2/3.
    for (const [draw, kept] of [
      [0.9, false],
      [0.5, true],
    ] as const) {
      const t = setup({ lossy: 2, random: () => draw })
      const reader = `l${draw * 10}`
      await t.commit(
        t.follow(reader, 'lx'),
        t.follow(reader, 'ly'),
        t.follow(reader, 'lz'),
        t.follow('lq', 'lx'),
      )
      await t.activate(reader)
      await t.activate('lq')
      const dropped = await metric('openplane_timeline_lossy_dropped_total')
      const [change, row] = await t.post('lx')
      await t.commit(change)
      expect(await t.uris(reader)).toEqual(kept ? [row.uri] : [])
      // A reader within the limit always gets it.
      expect(await t.uris('lq')).toContain(row.uri)
      expect(await metric('openplane_timeline_lossy_dropped_total')).toBe(dropped + (kept ? 0 : 1))
    }
  })

  it('a celebrity’s posts go to its own list, and spread to followers when it stops being one', async () => {
    const t = setup({ celebrity: 2 })
    await t.commit(t.follow('ca', 'cs'), t.follow('cb', 'cs'))
    expect(t.home.celebrities.has(did('cs'))).toBe(true)
    await t.activate('ca')
    await t.home.seedAuthor(did('cs'))
    const [change, row] = await t.post('cs')
    await t.commit(change)
    expect(await t.uris('ca')).toEqual([])
    const recent = await t.store.authorRecent([did('cs')], { limit: 10 })
    expect(recent.items.map((i) => i.uri)).toEqual([row.uri])
    // The home timeline merges it in at read time.
    const page = await t.home.read(did('ca'), 10, undefined)
    expect(page?.items.map((i) => i.uri)).toEqual([row.uri])
    await t.commit(t.unfollow('cb', 'cs'))
    expect(t.home.celebrities.has(did('cs'))).toBe(false)
    expect(await t.uris('ca')).toEqual([row.uri])
  })

  it('hibernation drops inactive readers, and fan-out then skips them', async () => {
    const t = setup()
    await t.commit(t.follow('ha', 'hz'))
    await t.activate('ha')
    // Two hours on, past the one-hour window.
    expect(await t.home.hibernate(Date.now() + 2 * HOUR)).toBe(1)
    expect(await t.store.isMaterialised(did('ha'))).toBe(false)
    const [change] = await t.post('hz')
    await t.commit(change)
    expect(await t.store.isMaterialised(did('ha'))).toBe(false)
  })

  it('fan-out reaches only readers known to have timelines; a restart learns them from the store before its first batch', async () => {
    const t = setup()
    await t.commit(t.follow('ra', 'rz'))
    await t.activate('ra')
    // What a restarted process has: the same store and graph, nothing in memory.
    const home = new HomeTimelines(t.store, t.graph, new Celebrities(t.graph, Infinity), t.source, {
      activeWindowMs: HOUR,
    })
    const fanout = new FanOut(t.graph, home, t.source, { lossyFollowLimit: Infinity })
    const commit = async (change: Change) => {
      fanout.onCommitted([change], { source: 'test', cursor: ++seq })
      await fanout.idle()
    }
    expect(home.active.size).toBe(0)
    const [delivered, p1] = await t.post('rz')
    await commit(delivered)
    expect(home.active.has(t.graph.ids.id(did('ra'))!)).toBe(true)
    expect(await t.uris('ra')).toContain(p1.uri)
  })

  it('a failed fan-out write drops only the lists it touched; the rest keep serving', async () => {
    const t = setup()
    await t.commit(t.follow('xa', 'xz'), t.follow('xb', 'xz'), t.follow('xc', 'xy'))
    for (const r of ['xa', 'xb', 'xc']) await t.activate(r)
    const dropped = await metric('openplane_timeline_stale_dropped_total')
    t.store.failNextFanOut = true
    const [change, row] = await t.post('xz')
    await t.commit(change)
    // xz's followers may hold the post or not: their lists are gone, and rebuild on a read.
    expect(await t.store.isMaterialised(did('xa'))).toBe(false)
    expect(await t.store.isMaterialised(did('xb'))).toBe(false)
    expect(await metric('openplane_timeline_stale_dropped_total')).toBe(dropped + 3)
    // Everyone else is served from the store as before: no global recovery.
    expect(t.home.status()).toMatchObject({ ok: true, state: 'serving' })
    expect(await t.home.read(did('xc'), 10, undefined)).toBeDefined()
    // A dropped list is built on its next read, which the store then answers. (The rebuild
    // reads Postgres, where these follows are not: here it only materialises.)
    expect(await t.home.read(did('xa'), 10, undefined)).toEqual({ items: [], cursor: '' })
    expect(await t.store.isMaterialised(did('xa'))).toBe(true)
    expect(await t.uris('xc')).not.toContain(row.uri)
  })

  it('when the lists cannot be dropped either, every list is treated as stale', async () => {
    const t = setup()
    await t.commit(t.follow('ya', 'yz'), t.follow('yc', 'yy'))
    for (const r of ['ya', 'yc']) await t.activate(r)
    t.store.failNextFanOut = true
    t.store.failEvictions = true
    const [change] = await t.post('yz')
    await t.commit(change)
    expect(t.home.status()).toMatchObject({ ok: false, state: 'recovering' })
    expect(await t.home.read(did('yc'), 10, undefined)).toBeUndefined()
    t.store.failEvictions = false
    await t.home.recover()
    expect(t.home.status()).toMatchObject({ ok: true, state: 'serving' })
  })

  it('a first read builds the timeline once and is answered from it, however many ask at once', async () => {
    const t = setup()
    await t.commit(t.follow('fr', 'fs'))
    const value = async (name: string, labels: Record<string, string>) => {
      const m = (await registry.getMetricsAsJSON()).find((x) => x.name === name)
      const v = m?.values.find((x) => Object.entries(labels).every(([k, l]) => x.labels[k] === l))
      return Number(v?.value ?? 0)
    }
    const built = () =>
      value('openplane_timeline_rebuilds_total', { kind: 'timeline', outcome: 'done' })
    const fromStore = () => value('openplane_timeline_reads_total', { path: 'store', reason: '' })
    const cold = () => value('openplane_timeline_reads_total', { path: 'postgres', reason: 'cold' })
    const [b0, s0, c0] = [await built(), await fromStore(), await cold()]
    const pages = await Promise.all(
      Array.from({ length: 5 }, () => t.home.read(did('fr'), 10, undefined)),
    )
    expect(pages.every((p) => p !== undefined)).toBe(true)
    expect(await built()).toBe(b0 + 1)
    expect(await fromStore()).toBe(s0 + 5)
    expect(await cold()).toBe(c0)
  })
})

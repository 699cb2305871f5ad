// Degradation on a Redis of our own: flushed (timelines read as not materialised and rebuild),
// hung (the deadline answers), stopped (errors answer at once), back empty (rebuilds).
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  createRedisClient,
  RedisTimelineStore,
  TimelineStoreUnavailable,
  waitForRedis,
  type TimelineItem,
} from '@openplane/timelines'
import { startRedisServer, type RedisServer } from '../harness/redis-cluster.ts'
import { did, post } from './behaviour.ts'

const TIMEOUT_MS = 300
const alice = did('alice')
const bob = did('bob')
const readers = [alice, bob, did('carol')]
const made = new Map<number, TimelineItem>()
/** The n-th item, the same object every time (n milliseconds into the day). */
function item(n: number): TimelineItem {
  const at = new Date(Date.UTC(2024, 4, 1) + n).toISOString()
  if (!made.has(n)) made.set(n, post(did('author'), at))
  return made.get(n)!
}

/** Every operation of the store, each expected to reject with TimelineStoreUnavailable. */
const operations = (store: RedisTimelineStore): Record<string, () => Promise<unknown>> => ({
  page: () => store.page(alice, { limit: 10 }),
  isMaterialised: () => store.isMaterialised(alice),
  fanOut: () => store.fanOut(readers, item(9)),
  insert: () => store.insert(alice, [item(9)]),
  remove: () => store.remove(readers, item(9).uri),
  removeOriginator: () => store.removeOriginator(readers, bob),
  startRebuild: () => store.startRebuild('timeline', alice),
  materialise: () => store.materialise('timeline', alice, [item(1)], { complete: true }),
  evict: () => store.evict([alice]),
  pushAuthorRecent: () => store.pushAuthorRecent(bob, item(9)),
  authorRecent: () => store.authorRecent([bob], { limit: 10 }),
  touch: () => store.touch(alice),
  activeSince: () => store.activeSince(0),
  evictInactive: () => store.evictInactive(0),
  memoryStats: () => store.memoryStats([alice]),
})

async function expectAllUnavailable(store: RedisTimelineStore, within: number): Promise<void> {
  for (const [name, op] of Object.entries(operations(store))) {
    const started = Date.now()
    const err = await op().then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(err, name).toBeInstanceOf(TimelineStoreUnavailable)
    expect(Date.now() - started, name).toBeLessThan(within)
  }
}

describe('RedisTimelineStore when Redis fails', () => {
  let server: RedisServer
  let store: RedisTimelineStore

  beforeAll(async () => {
    server = await startRedisServer()
    const client = createRedisClient({ nodes: [server], commandTimeoutMs: TIMEOUT_MS })
    await waitForRedis(client)
    store = new RedisTimelineStore(client, { timeoutMs: TIMEOUT_MS })
  })
  afterAll(async () => {
    await store?.close()
    await server?.dispose()
  })

  it('does not time out an answer that arrived in time while this process was busy', async () => {
    const client = createRedisClient({ nodes: [server], commandTimeoutMs: 5000 })
    await waitForRedis(client)
    const busy = new RedisTimelineStore(client, { timeoutMs: 100 })
    try {
      await busy.materialise('timeline', alice, [item(1)], { complete: true })
      // Once first: Redis then holds the read script, and the read below is one round trip.
      await busy.page(alice, { limit: 10 })
      const read = busy.page(alice, { limit: 10 }).then(
        (page) => page?.items.length,
        (e: unknown) => e,
      )
      // Let the command leave, then hold the event loop past the deadline: the answer arrives
      // meanwhile and is read in the turn the deadline's timer fires in.
      await new Promise((r) => setImmediate(r))
      const until = performance.now() + 300
      while (performance.now() < until);
      expect(await read).toBe(1)
      // An answer that really does not come in time still times out (Redis hung).
      server.signal('SIGSTOP')
      const hung = await busy.page(alice, { limit: 10 }).then(
        () => undefined,
        (e: unknown) => e,
      )
      expect(hung).toBeInstanceOf(TimelineStoreUnavailable)
    } finally {
      server.signal('SIGCONT')
      await busy.close()
    }
  })

  it('reads a flushed Redis as "not materialised", and rebuilds', async () => {
    await store.materialise('timeline', alice, [item(1)], { complete: true })
    await store.materialise('author', bob, [item(2)], { complete: true })
    expect(await store.fanOut(readers, item(3))).toBe(1)
    await server.cli('FLUSHALL')
    expect(await store.isMaterialised(alice)).toBe(false)
    expect(await store.page(alice, { limit: 10 })).toBeNull()
    expect(await store.fanOut(readers, item(4))).toBe(0)
    expect(await store.authorRecent([bob], { limit: 10 })).toMatchObject({ missing: [bob] })
    await store.materialise('timeline', alice, [item(1), item(3)], { complete: true })
    expect(await store.page(alice, { limit: 10 })).toEqual({
      items: [item(3), item(1)],
      complete: true,
    })
  })

  it('answers within the deadline when Redis hangs', async () => {
    server.signal('SIGSTOP')
    try {
      await expectAllUnavailable(store, TIMEOUT_MS + 400)
    } finally {
      server.signal('SIGCONT')
    }
  })

  it('answers at once when Redis is gone, naming the unconfirmed fan-out readers', async () => {
    await store.materialise('timeline', alice, [], { complete: true }) // the connection is fine again
    await server.stop()
    await expectAllUnavailable(store, TIMEOUT_MS + 400)
    const err = await store.fanOut(readers, item(5)).catch((e: unknown) => e)
    expect((err as TimelineStoreUnavailable).unconfirmed).toEqual(readers)
  })

  it('serves again once Redis is back, empty: timelines rebuild', async () => {
    await server.restart()
    const deadline = Date.now() + 10_000
    let materialised: boolean | undefined
    while (materialised === undefined) {
      materialised = await store.isMaterialised(alice).catch(() => undefined)
      if (Date.now() > deadline) throw new Error('store did not come back')
      await new Promise((r) => setTimeout(r, 50))
    }
    expect(materialised).toBe(false)
    await store.materialise('timeline', alice, [item(6)], { complete: true })
    expect(await store.fanOut(readers, item(7))).toBe(1)
    expect((await store.page(alice, { limit: 10 }))!.items).toEqual([item(7), item(6)])
  })
})

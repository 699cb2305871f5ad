// The behaviour suite on the shared Redis (127.0.0.1:6379 unless OPENPLANE_TEST_REDIS_HOST),
// under a key prefix of this run only; then a random workload answered alike by Redis and the
// in-process store, call by call.
import { tmpdir } from 'node:os'
import path from 'node:path'
import type { Redis } from 'ioredis'
import { afterAll, describe, expect, it } from 'vitest'
import {
  createRedisClient,
  cursorOf,
  decodeMember,
  encodeMember,
  MemoryTimelineStore,
  parseRedisNodes,
  RedisTimelineStore,
  seededRandom,
  waitForRedis,
  type HomeRead,
  type TimelineItem,
  type TimelineStore,
} from '@openplane/timelines'
import { decodeTimeKey } from '../../packages/server/src/routes/util/pagination.ts'
import { REDIS_HOST, uniqueName } from '../harness/env.ts'
import { startRedisServer } from '../harness/redis-cluster.ts'
import { did, post, repost, timelineStoreBehaviour } from './behaviour.ts'
import { deleteKeys, redisFactory } from './redis-factory.ts'

/** A store of its own on the shared Redis, under a key prefix of this run, removed after `fn`. */
async function withOwnStore(
  tag: string,
  fn: (store: RedisTimelineStore, client: Redis, prefix: string) => Promise<void>,
): Promise<void> {
  const nodes = parseRedisNodes(REDIS_HOST)
  const client = createRedisClient({ nodes }) as Redis
  await waitForRedis(client)
  const prefix = `${uniqueName(tag)}:`
  const store = new RedisTimelineStore(client, { prefix, timeoutMs: 5000 })
  try {
    await fn(store, client, prefix)
  } finally {
    await store.close()
    await deleteKeys(nodes, false, prefix)
  }
}

describe('RedisTimelineStore through a Unix socket', () => {
  it('reads and writes as over TCP, with the socket named as its node', async () => {
    const socket = path.join(tmpdir(), `${uniqueName('op-redis')}.sock`)
    const server = await startRedisServer(['--unixsocket', socket, '--unixsocketperm', '700'])
    const client = createRedisClient({ nodes: parseRedisNodes(socket) }) as Redis
    try {
      await waitForRedis(client)
      // The connection is the socket's, not the server's TCP port.
      expect(String(await client.client('INFO'))).toContain(`addr=${socket}`)
      const store = new RedisTimelineStore(client, { timeoutMs: 5000 })
      const reader = did('ux')
      const items = [
        post(did('ub'), '2024-05-01T12:00:00.000Z'),
        post(did('ub'), '2024-05-01T12:00:01.000Z'),
      ]
      expect(await store.materialise('timeline', reader, items, { complete: true })).toBe(true)
      const read = await store.home(reader, [], { limit: 10 })
      expect(read.timeline?.members.map(decodeMember)).toEqual([items[1], items[0]])
    } finally {
      client.disconnect()
      await server.stop()
    }
  })
})

describe('RedisTimelineStore on one Redis', () => {
  const factory = redisFactory(() => parseRedisNodes(REDIS_HOST), false)
  afterAll(() => factory.cleanup())
  timelineStoreBehaviour(() => factory)

  it('answers a random workload exactly as MemoryTimelineStore does', async () => {
    const opts = { targetLength: 20, authorTargetLength: 12 }
    const redis = await factory.make(opts)
    await randomWorkload({ memory: new MemoryTimelineStore(opts), redis, reads: redis })
  })

  it('answers home reads from copies of celebrity lists exactly, while another process writes them', async () => {
    // The reading store keeps copies; every write goes through the other, as the indexer's
    // process writes what the servers read. A copy that outlived a write answers wrong.
    const opts = { targetLength: 20, authorTargetLength: 12 }
    const nodes = parseRedisNodes(REDIS_HOST)
    const prefix = `${uniqueName('opcp')}:`
    const open = async () => {
      const client = createRedisClient({ nodes })
      await waitForRedis(client)
      return new RedisTimelineStore(client, { ...opts, prefix, timeoutMs: 5000 })
    }
    const [redis, reads] = [await open(), await open()]
    try {
      const copied = await randomWorkload(
        { memory: new MemoryTimelineStore(opts), redis, reads },
        { seed: 78, homeShare: 0.3, count: 1200 },
      )
      // Both ways were taken many times: lists answered from copies, and lists read.
      expect(copied.used).toBeGreaterThan(100)
      expect(copied.named - copied.used).toBeGreaterThan(100)
    } finally {
      await Promise.all([redis.close(), reads.close()])
      await deleteKeys(nodes, false, prefix)
    }
  })

  /**
   * A seeded random workload on the memory store and on Redis, every answer compared; home
   * reads on Redis go to `reads` (which may be another store on the same keys). `homeShare`:
   * ops that are first-page home reads, besides the mix; `count` ops in all. Returns the
   * celebrity lists home reads on Redis named, and how many came from copies.
   */
  async function randomWorkload(
    { memory, redis, reads }: { memory: TimelineStore; redis: TimelineStore; reads: TimelineStore },
    { seed = 77, homeShare = 0, count = 400 } = {},
  ): Promise<{ named: number; used: number }> {
    const rand = seededRandom(seed)
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!
    const readers = Array.from({ length: 6 }, (_, i) => did(`rd${'abcdef'[i]}`))
    const authors = Array.from({ length: 4 }, (_, i) => did(`au${'abcd'[i]}`))
    const seen: TimelineItem[] = []
    let clock = Date.parse('2024-05-01T12:00:00.000Z')
    const fresh = (): TimelineItem => {
      // Many equal milliseconds, and now and then a later second (heads are timed to the second).
      clock += rand() < 0.1 ? 1000 : Math.floor(rand() * 3)
      const at = new Date(rand() < 0.1 ? clock - 40 : clock).toISOString() // some backdated
      const x =
        rand() < 0.25 && seen.length
          ? repost(pick(authors), pick(seen), at)
          : post(pick(authors), at)
      seen.push(x)
      return x
    }
    const someReaders = () => readers.filter(() => rand() < 0.5)
    const cursor = () =>
      rand() < 0.5 || !seen.length ? undefined : decodeTimeKey(cursorOf(pick(seen)))
    const ops: [string, (s: TimelineStore, store: number) => Promise<unknown>][] = []
    // Each store's rebuild tokens, by reader: tokens differ, what they allow must not.
    const tokens = [new Map<string, string>(), new Map<string, string>()]
    for (let i = 0; i < count; i++) {
      if (homeShare && rand() < homeShare) {
        const [rd, cs, limit] = [pick(readers), authors.filter(() => rand() < 0.8), 4]
        ops.push(['home', (s) => s.home(rd, cs, { limit })])
        continue
      }
      if (homeShare && rand() < 0.1 && seen.length) {
        // An author's item deleted: out of the author's list (by uri or as the exact item).
        // A recent one, so that it is often on a list's first page.
        const x = pick(seen.slice(-20))
        const uri = x.repost ?? x.uri
        const author = uri.split('/')[2]!
        const target = rand() < 0.5 ? uri : x
        ops.push(['removeAuthorRecent', (s) => s.removeAuthorRecent(author, target)])
        continue
      }
      const r = rand()
      if (r < 0.35) {
        const [rs, x] = [someReaders(), fresh()]
        ops.push(['fanOut', (s) => s.fanOut(rs, x)])
      } else if (r < 0.4) {
        const [rd, xs] = [pick(readers), seen.filter(() => rand() < 0.3)]
        const complete = rand() < 0.5 || !xs.length
        ops.push(['materialise', (s) => s.materialise('timeline', rd, xs, { complete })])
      } else if (r < 0.415) {
        const [rd, xs] = [pick(readers), seen.filter(() => rand() < 0.3)]
        ops.push([
          'materialise with the rebuild token',
          (s, i) =>
            s.materialise('timeline', rd, xs, {
              complete: true,
              token: tokens[i]!.get(rd) ?? 'none',
            }),
        ])
      } else if (r < 0.43) {
        const rd = pick(readers)
        ops.push([
          'startRebuild',
          async (s, i) => {
            const token = await s.startRebuild('timeline', rd)
            if (token) tokens[i]!.set(rd, token)
            return token ? 'started' : 'busy'
          },
        ])
      } else if (r < 0.48 && seen.length) {
        const [rs, x] = [someReaders(), pick(seen)]
        const target = rand() < 0.5 ? (x.repost ?? x.uri) : x
        ops.push(['remove', (s) => s.remove(rs, target)])
      } else if (r < 0.5) {
        const [rs, a] = [someReaders(), pick(authors)]
        ops.push(['removeOriginator', (s) => s.removeOriginator(rs, a)])
      } else if (r < 0.53) {
        const [rd, xs] = [pick(readers), [fresh(), fresh()]]
        ops.push(['insert', (s) => s.insert(rd, xs)])
      } else if (r < 0.6) {
        const a = pick(authors)
        const xs = seen.filter((x) => (x.repost ?? x.uri).includes(a) && rand() < 0.5)
        const complete = rand() < 0.5 || !xs.length
        ops.push(['materialiseAuthor', (s) => s.materialise('author', a, xs, { complete })])
      } else if (r < 0.7) {
        const [a, x] = [pick(authors), fresh()]
        ops.push(['pushAuthorRecent', (s) => s.pushAuthorRecent(a, x)])
      } else if (r < 0.71) {
        const as = authors.filter(() => rand() < 0.3)
        ops.push(['evictAuthors', (s) => s.evictAuthors(as)])
      } else if (r < 0.72) {
        const a = pick(authors)
        ops.push([
          'startAuthorRebuild',
          async (s) => ((await s.startRebuild('author', a)) ? 'started' : 'busy'),
        ])
      } else if (r < 0.76) {
        // A home page: the celebrity lists a full timeline page passes over (their heads below
        // its floor) are not read on Redis; the in-process store reads every one.
        const [rd, cs, limit, before] = [
          pick(readers),
          authors.filter(() => rand() < 0.7),
          1 + Math.floor(rand() * 6),
          cursor(),
        ]
        ops.push(['home', (s) => s.home(rd, cs, { limit, before })])
      } else if (r < 0.8) {
        const [as, limit, before] = [
          authors.filter(() => rand() < 0.6),
          1 + Math.floor(rand() * 15),
          cursor(),
        ]
        ops.push(['authorRecent', (s) => s.authorRecent(as, { limit, before })])
      } else {
        const [rd, limit, before] = [pick(readers), Math.floor(rand() * 25), cursor()]
        ops.push(['page', (s) => s.page(rd, { limit, before })])
      }
    }
    const answers: unknown[] = []
    const copied = { named: 0, used: 0 }
    for (const [i, [name, op]] of ops.entries()) {
      const home = name === 'home'
      const [mem, red] = [await op(memory, 0), await op(home ? reads : redis, 1)]
      let answer = red
      if (home) {
        // How many lists came from copies is the Redis store's own account.
        const { copies, ...rest } = red as HomeRead
        copied.named += copies?.named ?? 0
        copied.used += copies?.used ?? 0
        answer = rest
      }
      expect(answer, `op ${i}: ${name}`).toEqual(mem)
      answers.push(mem)
    }
    // The workload reached the interesting states: trimmed lists, exact and inexact pages.
    const pagesSeen = answers.filter((a): a is { items: unknown[]; complete: boolean } =>
      Boolean(a && typeof a === 'object' && 'complete' in a),
    )
    expect(pagesSeen.filter((p) => p.complete && p.items.length > 3).length).toBeGreaterThan(5)
    expect(pagesSeen.filter((p) => !p.complete).length).toBeGreaterThan(5)
    const pages = (s: TimelineStore) => Promise.all(readers.map((r) => s.page(r, { limit: 100 })))
    expect(await pages(redis)).toEqual(await pages(memory))
    return copied
  }

  it('passes over celebrity lists with nothing new enough for the page, and only those', async () => {
    await withOwnStore('ophd', async (store, client, prefix) => {
      const heads = `${prefix}heads`
      const listOf = (a: string) => `${prefix}a:{${a}}`
      const at = (s: number) => new Date(Date.UTC(2024, 4, 1, 12, 0, s)).toISOString()
      const [reader, old, fresh] = ['hdreader', 'hdold', 'hdfresh'].map((x) => did(x)) as [
        string,
        string,
        string,
      ]
      const celebs = [old, fresh]
      const home = async () => {
        const read = await store.home(reader, celebs, { limit: 3 })
        return { members: read.celebrities?.members.map((m) => decodeMember(m)), read }
      }
      // A full first page of the timeline ends at second 30: its floor.
      const followed = [40, 35, 30, 20].map((s) => post(did('hdfollowed'), at(s)))
      await store.materialise('timeline', reader, followed, { complete: true })
      await store.materialise('author', reader, [], { complete: true })
      const oldItems = [10, 5].map((s) => post(old, at(s)))
      const freshItem = post(fresh, at(38))
      await store.materialise('author', old, oldItems, { complete: true })
      await store.materialise('author', fresh, [freshItem], { complete: true })
      expect(await client.hget(heads, listOf(old))).toBe('20240501120010')
      expect(await client.hget(heads, listOf(fresh))).toBe('20240501120038')
      expect((await home()).members).toEqual([freshItem])

      // Passed over, not read: an item put in behind the scripts' back stays unseen…
      const hidden = post(old, at(36))
      await client.zadd(listOf(old), 0, encodeMember(hidden))
      expect((await home()).members).toEqual([freshItem])
      // …until a write through the store times the list's new head.
      const pushed = post(old, at(37))
      await store.pushAuthorRecent(old, pushed)
      expect(await client.hget(heads, listOf(old))).toBe('20240501120037')
      expect((await home()).members).toEqual([freshItem, pushed, hidden])

      // A list Redis evicted (or an operator deleted) under a low time: read, hence missing.
      await store.materialise('author', old, oldItems, { complete: true })
      await client.del(listOf(old))
      const evicted = await home()
      expect(evicted.read.celebrities).toMatchObject({ members: [encodeMember(freshItem)] })
      expect(evicted.read.celebrities?.missing).toEqual([old])

      // Evicting and rebuilding through the store take the time away: never passed over then.
      await store.materialise('author', old, oldItems, { complete: true })
      await store.evictAuthors([old])
      expect(await client.hget(heads, listOf(old))).toBeNull()
      await store.materialise('author', old, oldItems, { complete: true })
      const token = await store.startRebuild('author', old)
      expect(token).toBeDefined()
      expect(await client.hget(heads, listOf(old))).toBeNull()
      expect((await home()).read.celebrities?.missing).toEqual([old])
      // Writes collected during the rebuild do not time it; materialising does.
      await store.pushAuthorRecent(old, post(old, at(2)))
      expect(await client.hget(heads, listOf(old))).toBeNull()
      await store.materialise('author', old, oldItems, { complete: true, token })
      expect(await client.hget(heads, listOf(old))).toBe('20240501120010')
      // An empty list is timed lowest; a head of another sortAt shape is always read.
      await store.materialise('author', old, [], { complete: true })
      expect(await client.hget(heads, listOf(old))).toBe('0')
      const odd = post(old, '2024-05-01T12:00:01.000123Z')
      await store.materialise('author', old, [odd], { complete: true })
      expect(await client.hget(heads, listOf(old))).toBe('99999999999999')
      expect((await home()).members).toEqual([freshItem])
    })
  })

  it('reads the celebrities of an array that can change afresh, and keeps those of a frozen one', async () => {
    await withOwnStore('opck', async (store) => {
      const at = (s: number) => new Date(Date.UTC(2024, 4, 1, 12, 0, s)).toISOString()
      const [reader, a, b] = ['ckreader', 'ckauthora', 'ckauthorb'].map((x) => did(x)) as [
        string,
        string,
        string,
      ]
      await store.materialise('timeline', reader, [], { complete: true })
      await store.materialise('author', reader, [], { complete: true })
      const [fromA, fromB] = [post(a, at(10)), post(b, at(20))]
      await store.materialise('author', a, [fromA], { complete: true })
      await store.materialise('author', b, [fromB], { complete: true })
      const merged = async (celebs: readonly string[]) =>
        (await store.home(reader, celebs, { limit: 5 })).celebrities?.members.map((m) =>
          decodeMember(m),
        )
      // The same array, changed between reads (with a repeat): each read names what it holds.
      const changing = [a]
      expect(await merged(changing)).toEqual([fromA])
      changing.push(b, b)
      expect(await merged(changing)).toEqual([fromB, fromA])
      changing.splice(0, 1)
      expect(await merged(changing)).toEqual([fromB])
      // A frozen array cannot change: its keys are kept, and the reads stay the same.
      const frozen = Object.freeze([b, a, a])
      expect(await merged(frozen)).toEqual([fromB, fromA])
      expect(await merged(frozen)).toEqual([fromB, fromA])
    })
  })

  it('uses a copy of a celebrity list only while its version holds, even across lost data', async () => {
    await withOwnStore('opcv', async (writer, client, prefix) => {
      const reads = new RedisTimelineStore(
        createRedisClient({ nodes: parseRedisNodes(REDIS_HOST) }),
        {
          prefix,
          timeoutMs: 5000,
        },
      )
      try {
        const at = (s: number) => new Date(Date.UTC(2024, 4, 1, 12, 0, s)).toISOString()
        const [reader, celeb] = [did('cvreader'), did('cvceleb')]
        const listKey = `${prefix}a:{${celeb}}`
        const versionOf = async () => Number(await client.hget(`${prefix}heads:v`, listKey))
        const home = async () => {
          const read = await reads.home(reader, [celeb], { limit: 3 })
          return { members: read.celebrities?.members.map(decodeMember), read }
        }
        // A timeline short of a page: the celebrity's list is merged whole.
        await writer.materialise('timeline', reader, [post(did('cvother'), at(1))], {
          complete: true,
        })
        await writer.materialise('author', reader, [], { complete: true })
        const first = post(celeb, at(2))
        await writer.materialise('author', celeb, [first], { complete: true })
        expect((await home()).read.copies).toEqual({ named: 1, used: 0 })
        const again = await home()
        expect(again.read.copies).toEqual({ named: 1, used: 1 })
        expect(again.members).toEqual([first])

        // Written by another process: a new version, read again, then copied again.
        const v1 = await versionOf()
        const second = post(celeb, at(3))
        await writer.pushAuthorRecent(celeb, second)
        expect(await versionOf()).toBeGreaterThan(v1)
        const pushed = await home()
        expect(pushed.read.copies).toEqual({ named: 1, used: 0 })
        expect(pushed.members).toEqual([second, first])
        expect((await home()).read.copies).toEqual({ named: 1, used: 1 })

        // Redis loses everything of the list, its version and the counter; the list comes back
        // with other items: its new version is none it had before.
        const v2 = await versionOf()
        await client.del(listKey, `${prefix}heads:v`, `${prefix}heads:n`, `${prefix}heads`)
        const third = post(celeb, at(4))
        await writer.materialise('author', celeb, [first, third], { complete: true })
        expect(await versionOf()).toBeGreaterThan(v2)
        const rebuilt = await home()
        expect(rebuilt.read.copies).toEqual({ named: 1, used: 0 })
        expect(rebuilt.members).toEqual([third, first])

        // Deleted behind the scripts' back, its version left: not served from the copy.
        await home()
        await client.del(listKey)
        const gone = await home()
        expect(gone.read.copies).toEqual({ named: 1, used: 0 })
        expect(gone.read.celebrities?.missing).toEqual([celeb])
      } finally {
        await reads.close()
      }
    })
  })

  it("sends one turn's commands in one write and answers each", async () => {
    await withOwnStore('optw', async (store, client) => {
      const readers = ['a', 'b', 'c'].map((x) => did(`turn${x}`))
      const items = readers.map((_, i) => [
        post(did('turnauthor'), `2024-05-0${i + 1}T00:00:00.000Z`),
      ])
      await Promise.all(
        readers.map((r, i) => store.materialise('timeline', r, items[i]!, { complete: true })),
      )
      // Three reads started in one turn: held in the socket, nothing handed to the kernel yet.
      const reads = readers.map((r) => store.page(r, { limit: 10 }))
      const { stream } = client
      expect(stream.writableCorked).toBe(1)
      expect(stream.writableLength).toBeGreaterThan(0)
      const pages = await Promise.all(reads)
      expect(pages.map((p) => p?.items)).toEqual(items)
      // Released when the turn ended; a later turn's read leaves and is answered too.
      expect(stream.writableCorked).toBe(0)
      expect((await store.page(readers[0]!, { limit: 10 }))?.items).toEqual(items[0])
    })
  })
})

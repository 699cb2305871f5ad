// pnpm bench:timeline-store — what one timeline entry costs in Redis, and how fast a fan-out
// writes. Not part of CI. Bytes per entry on the shared Redis (under a key prefix of its own,
// deleted at the end) and on a private redis-server with listpack limits raised; fan-out on a
// private redis-server with the default config, so a few hundred MB never land on the shared one.
//   BENCH_READERS (default 200) timelines of BENCH_ITEMS (default 500) entries for bytes/entry
//   BENCH_FOLLOWERS (default 100000) readers per fan-out, BENCH_POSTS (default 5) fan-outs
//   BENCH_FULL (default 20) target length of the "full timelines" run (every add trims or nearly)
//   BENCH_BATCH (default 500) readers per script call, OPENPLANE_TEST_REDIS_HOST
import { performance } from 'node:perf_hooks'
import {
  createRedisClient,
  encodeMember,
  MemoryTimelineStore,
  parseRedisNodes,
  RedisTimelineStore,
  seededRandom,
  waitForRedis,
  type RedisNode,
  type TimelineItem,
  type TimelineStore,
} from '@openplane/timelines'
import { REDIS_HOST, uniqueName } from '../harness/env.ts'
import { startRedisServer } from '../harness/redis-cluster.ts'
import { deleteKeys } from '../timelines/redis-factory.ts'

const READERS = Number(process.env.BENCH_READERS ?? 200)
const ITEMS = Number(process.env.BENCH_ITEMS ?? 500)
const FOLLOWERS = Number(process.env.BENCH_FOLLOWERS ?? 100_000)
const POSTS = Number(process.env.BENCH_POSTS ?? 5)
const BATCH = Number(process.env.BENCH_BATCH ?? 500)
const FULL = Number(process.env.BENCH_FULL ?? 20)
const log = (...a: unknown[]) => console.log('[bench:timeline-store]', ...a)

// Realistic sizes: 24-character PLC ids, 13-character TID rkeys, 59-character CIDv1s.
const rand = seededRandom(1)
const B32 = 'abcdefghijklmnopqrstuvwxyz234567'
const b32 = (n: number): string =>
  Array.from({ length: n }, () => B32[Math.floor(rand() * 32)]).join('')
const did = (): string => `did:plc:${b32(24)}`
const authors = Array.from({ length: 2000 }, did)
const T0 = Date.parse('2025-01-01T00:00:00.000Z')

function item(i: number): TimelineItem {
  const author = authors[Math.floor(rand() * authors.length)]!
  const post = {
    uri: `at://${author}/app.bsky.feed.post/3l${b32(11)}`,
    sortAt: new Date(T0 + i * 997).toISOString(),
    cid: `bafyrei${b32(52)}`,
  }
  if (rand() >= 0.2) return post // a fifth are reposts
  const reposter = authors[Math.floor(rand() * authors.length)]!
  return {
    ...post,
    repost: `at://${reposter}/app.bsky.feed.repost/3l${b32(11)}`,
    cid: `bafyrei${b32(52)}`,
  }
}

async function inBatches<T>(xs: readonly T[], f: (x: T) => Promise<unknown>): Promise<void> {
  for (let i = 0; i < xs.length; i += BATCH) await Promise.all(xs.slice(i, i + BATCH).map(f))
}

async function usedMemory(node: RedisNode): Promise<number> {
  const client = createRedisClient({ nodes: [node] })
  try {
    await waitForRedis(client)
    return Number(/used_memory:(\d+)/.exec(await client.info('memory'))?.[1])
  } finally {
    client.disconnect()
  }
}

/** READERS timelines of ITEMS entries drawn from a shared pool (fan-out shares items). */
async function bytesPerEntry(node: RedisNode, label: string): Promise<void> {
  const prefix = `${uniqueName('benchtl')}:`
  const client = createRedisClient({ nodes: [node], commandTimeoutMs: 30_000 })
  await waitForRedis(client)
  const store = new RedisTimelineStore(client, { prefix, targetLength: ITEMS, timeoutMs: 30_000 })
  try {
    const pool = Array.from({ length: ITEMS * 4 }, (_, i) => item(i))
    const readers = Array.from({ length: READERS }, did)
    const before = await usedMemory(node)
    await inBatches(readers, (r) =>
      store.materialise('timeline', r, pool.filter(() => rand() < 0.25).slice(0, ITEMS), {
        complete: true,
      }),
    )
    const stats = await store.memoryStats(readers)
    const delta = (await usedMemory(node)) - before
    const mean = (xs: number[]) => (xs.reduce((a, b) => a + b, 0) / xs.length).toFixed(0)
    const raw = pool.map(
      (x) => x.sortAt.length + x.cid.length + x.uri.length + (x.repost?.length ?? 0),
    )
    const members = pool.map((x) => encodeMember(x).length)
    log(
      `${label}: ${stats.sample.lists} timelines × ${Math.round(stats.sample.entries / stats.sample.lists)} entries:`,
      `MEMORY USAGE ${(stats.sample.bytes / stats.sample.entries).toFixed(1)} B/entry,`,
      `used_memory delta ${(delta / stats.sample.entries).toFixed(1)} B/entry`,
      `(member ${mean(members)} B; the item's fields ${mean(raw)} B)`,
    )
  } finally {
    await store.close()
    await deleteKeys([node], false, prefix)
  }
}

/**
 * FOLLOWERS readers, the first `share` of them materialised (with `prefill` items each); one
 * fan-out per post to all of them.
 */
async function fanOut(store: TimelineStore, label: string, share = 1, prefill = 0): Promise<void> {
  const readers = Array.from({ length: FOLLOWERS }, did)
  const warm = readers.filter((_, i) => i < FOLLOWERS * share)
  const items = Array.from({ length: prefill + 1 }, (_, i) => item(i))
  let t = performance.now()
  await inBatches(warm, (r) => store.materialise('timeline', r, items, { complete: prefill === 0 }))
  const materialiseMs = performance.now() - t
  const rates: number[] = []
  for (let p = 0; p < POSTS; p++) {
    t = performance.now()
    const written = await store.fanOut(readers, item(ITEMS * 8 + p))
    const s = (performance.now() - t) / 1000
    if (written !== warm.length) throw new Error(`wrote ${written} of ${warm.length}`)
    rates.push(readers.length / s)
  }
  rates.sort((a, b) => a - b)
  const median = rates[Math.floor(rates.length / 2)]!
  const fmt = (n: number) => Math.round(n).toLocaleString('en')
  log(
    `${label}: one item to ${fmt(FOLLOWERS)} followers (${fmt(warm.length)} materialised),`,
    `median of ${POSTS}: ${(FOLLOWERS / median).toFixed(3)} s = ${fmt(median)} readers/s`,
    `(slowest ${fmt(rates[0]!)}/s); materialising took ${(materialiseMs / 1000).toFixed(1)} s`,
  )
}

const shared = parseRedisNodes(REDIS_HOST)[0]!
log(`shared Redis ${REDIS_HOST}; ${BATCH} readers per script call`)

await bytesPerEntry(shared, 'Redis defaults (zset-max-listpack-entries 128, value 64)')
const tuned = await startRedisServer([
  '--zset-max-listpack-entries',
  String(ITEMS + 2),
  '--zset-max-listpack-value',
  '256',
])
try {
  await bytesPerEntry(tuned, `listpack up to ${ITEMS + 2} entries of 256 B (private server)`)
} finally {
  await tuned.dispose()
}

const plain = await startRedisServer()
try {
  const runs: [string, number, number, number][] = [
    ['Redis, empty timelines', 1, 0, 500],
    ['Redis, 10% of followers materialised', 0.1, 0, 500],
    [`Redis, full timelines (target ${FULL}, trimming)`, 1, FULL, FULL],
  ]
  for (const [label, share, prefill, targetLength] of runs) {
    const client = createRedisClient({ nodes: [plain], commandTimeoutMs: 30_000 })
    await waitForRedis(client)
    const store = new RedisTimelineStore(client, {
      timeoutMs: 30_000,
      batchSize: BATCH,
      targetLength,
    })
    try {
      await fanOut(store, label, share, prefill)
    } finally {
      await store.close()
      await plain.cli('FLUSHALL')
    }
  }
} finally {
  await plain.dispose()
}
const memory = new MemoryTimelineStore({ maxReaders: FOLLOWERS, targetLength: FULL })
await fanOut(memory, `in process, full timelines (target ${FULL})`, 1, FULL)

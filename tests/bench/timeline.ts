// pnpm bench:timeline — GetTimeline on the stock dataplane vs ours, side by side on the same
// Postgres data: a power-law userbase from the toolkit (100k users, density 5, a week of posts by
// default), loaded once into a kept schema. Both dataplanes run as their own processes; this
// process offers GetTimeline at fixed rates (open loop: requests leave on schedule whether or not
// earlier ones came back) for active readers, over gRPC as the AppView calls each (HTTP/1.1 to the stock's server, which has
// no HTTP/2; HTTP/2 to ours), and
// prints p50/p95/p99, achieved throughput and the highest offered rate each side holds with
// p99 <= 10 ms. Ours runs with its production defaults (Redis timelines, celebrity threshold
// 10 000 followers, lossy limit 2 000 follows), first as one server process (the indexer's), then
// as two on one Redis (a second with DATAPLANE_INDEXER=false, its graph from the change feed),
// the load spread over both URLs as the AppView spreads its calls. Each side also gets a
// sequential run (one request at a time) for its p50, and ours the CPU its processes spent per
// read. Ends with one line:
//   timeline: at 100 rps p99 stock <ms> ms, openplane <ms> ms, ratio <x>x; openplane max rps at p99<=10ms <n>
// (openplane: the better of its two setups). Not part of CI.
//
// The load comes from a worker thread with a heap of its own (load-worker.ts), not from this
// process's heap, which held the AppView's module graph (@atproto/bsky): there, the generator's
// major GCs (5–35 ms) landed on the latencies it measured. The worker runs with a small young
// generation: node:http2's client keeps each call's objects past one minor GC (about 4 KB a
// call; a bare client does it too), so every minor GC copies them, and with the default size
// each pause (3-6 ms, longer with more) lands on the latencies too. Small ones pause < 1 ms.
// Each step prints the generator's longest stall and its GC pauses, and the servers' GC pauses,
// longest event-loop delay and minor page faults (Redis's too): where a tail can come from.
//
//   BENCH_USERBASE  userbase parameter file (default packages/sim/examples/userbase-100k-with-posts.json)
//   BENCH_SCHEMA    schema to load into / reuse (default bench_tl_<num_users in letters: the stock
//                   dataplane accepts [A-Za-z_] only>, e.g. bench_tl_baaaaa for 100000)
//   BENCH_RATES     offered loads, req/s (default 25,50,100,200,400,800,1600,3200)
//   BENCH_SECONDS   seconds per load step (default 10)
//   BENCH_READERS   active readers drawn from users 1..max_active_user_id (default all of them)
//   BENCH_ONLY      stock | ours | load (load the data and stop; default: both sides)
//   BENCH_SERVERS   server process counts of ours to run (default 1,2)
//   BENCH_SEQUENTIAL requests of the sequential run (default 2000)
//   BENCH_DRIVER    raw (default: a lean HTTP/2 gRPC client, grpc-h2.ts) or connect (the
//                   transport the AppView's client is built on, connect-node's gRPC transport)
//                   for ours' load steps; the stock speaks HTTP/1.1 only and is always driven
//                   by that transport
//   BENCH_SESSIONS  HTTP/2 sessions per url of the raw driver (default 1, as the AppView has)
//   BENCH_REDIS     host:port (or a socket's path) of a Redis to keep timelines in across runs
//                   (default: a private one)
//   BENCH_OVERLOAD  0: skip ours' overload step (twice the highest rate served in full; it shows
//                   what is shed, the answered reads' latency, and that none moved to Postgres)
//   BENCH_PROFILE   a directory: CPU-profile our servers (through their inspectors) during the
//                   step at BENCH_PROFILE_AT req/s (default 400), save the profiles there and
//                   print where the time went
//   BENCH_PROFILE_ALLOCATIONS 1: with BENCH_PROFILE, also sample what the servers allocate
//                   (.heapprofile beside the CPU profile) and print bytes per read by function;
//                   survivors: only what outlives a minor GC (what scavenges copy and promote)
//   BENCH_NODE_FLAGS Node flags of our servers (default --max-semi-space-size=64, as deployed)
//   BENCH_SERVER_OUTPUT a directory: write each server's stdout and stderr there when it stops
//                   (with BENCH_NODE_FLAGS=--trace-gc, say, its GC pauses)
import { execFileSync } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { performance } from 'node:perf_hooks'
import {
  didFor,
  formatLoadReport,
  loadUserbase,
  progressReporter,
  readUserbaseParams,
} from '@openplane/sim'
import pg from 'pg'
import { PG_URL } from '../harness/env.ts'
import { freePort, spawnReady, type Child } from '../harness/processes.ts'
import { startRedisServer, type RedisServer } from '../harness/redis-cluster.ts'
import { profileWhile } from './inspector.ts'
import { minorFaults, processCpu, processCpuSplit, rss } from './proc.ts'
import {
  startGenerator,
  timelineRequestFrame,
  type LoadGenerator,
  type StepResult,
} from './load-generator.ts'
import { summarise, summariseAllocations } from './profile-summary.ts'

const root = path.resolve(import.meta.dirname, '../..')
const USERBASE = process.env.BENCH_USERBASE ?? 'packages/sim/examples/userbase-100k-with-posts.json'
const RATES = (process.env.BENCH_RATES ?? '25,50,100,200,400,800,1600,3200').split(',').map(Number)
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10)
const P99_GOAL_MS = 10
const SERVERS = (process.env.BENCH_SERVERS ?? '1,2').split(',').map(Number)
const SEQUENTIAL = Number(process.env.BENCH_SEQUENTIAL ?? 2000)
const PROFILE_DIR = process.env.BENCH_PROFILE
const PROFILE_AT = Number(process.env.BENCH_PROFILE_AT ?? 400)
const PROFILE_ALLOCATIONS = ((v) => {
  if (v === undefined || v === '' || v === '0') return undefined
  if (v === '1') return { interval: 16384 }
  if (v === 'survivors') return { interval: 16384, survivors: true }
  throw new Error(`BENCH_PROFILE_ALLOCATIONS: 1 or survivors, not ${JSON.stringify(v)}`)
})(process.env.BENCH_PROFILE_ALLOCATIONS)
const DRIVER = process.env.BENCH_DRIVER ?? 'raw'
if (DRIVER !== 'raw' && DRIVER !== 'connect') throw new Error('BENCH_DRIVER: raw or connect')
const RAW_SESSIONS = Number(process.env.BENCH_SESSIONS ?? 1)
const KEEP_REDIS = process.env.BENCH_REDIS
const OVERLOAD = process.env.BENCH_OVERLOAD !== '0'
const SERVER_OUTPUT = process.env.BENCH_SERVER_OUTPUT
// Ours runs under the Node flags it is deployed with (`pnpm start`, the Dockerfile).
const NODE_FLAGS = (process.env.BENCH_NODE_FLAGS ?? '--max-semi-space-size=64')
  .split(' ')
  .filter(Boolean)
/** Ours' overload step per setup, with the servers' reads by path during it. */
const overloadSteps: Record<string, StepResult & { paths: Record<string, number> }> = {}

const log = (...a: unknown[]) => console.log('[bench:timeline]', ...a)

export async function ensureLoaded(schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: PG_URL })
  await client.connect()
  try {
    const { rows } = await client.query<{ n: string }>(
      `select count(*) as n from information_schema.tables where table_schema = $1 and table_name = 'actor'`,
      [schema],
    )
    if (Number(rows[0]?.n) > 0) {
      const actors = await client.query<{ n: string }>(
        `select count(*) as n from "${schema}".actor`,
      )
      if (Number(actors.rows[0]?.n) > 0) {
        log(`reusing schema ${schema} (${actors.rows[0]?.n} actors)`)
        return
      }
    }
  } finally {
    await client.end()
  }
  const params = await readUserbaseParams(path.resolve(root, USERBASE))
  log(`loading ${params.name} into ${schema}`)
  const progress = progressReporter()
  const report = await loadUserbase(params, { url: PG_URL, schema, progress })
  progress.finish()
  console.log(formatLoadReport(report))
}

/**
 * The first `count` of users 1..active in a fixed shuffle, so every bench reads the same readers
 * in the same order.
 */
export function benchReaders(active: number, count: number): string[] {
  return Array.from({ length: count }, (_, i) => didFor(1 + ((i * 7919) % active)))
}

/** The default schema name: digits spelled as letters a–j. */
export function benchSchema(users: number): string {
  return `bench_tl_${String(users).replace(/\d/g, (d) => 'abcdefghij'[Number(d)]!)}`
}

/** Steps up the offered load until p99 exceeds the goal or throughput falls behind. */
async function sweep(
  name: string,
  gen: LoadGenerator,
  servers: Ours[] = [],
  redis?: Pick<RedisServer, 'cli'>,
): Promise<StepResult[]> {
  const results: StepResult[] = []
  const cpu = () => servers.reduce((sum, s) => sum + processCpu(s.child.proc.pid!), 0)
  const sys = () => servers.reduce((sum, s) => sum + processCpuSplit(s.child.proc.pid!).system, 0)
  const faults = () => servers.reduce((sum, s) => sum + minorFaults(s.child.proc.pid!), 0)
  for (const rate of RATES) {
    const c0 = cpu()
    const s0 = sys()
    const r0 = redis && (await redisCpu(redis))
    const rf0 = redis && minorFaults(await redisPid(redis))
    const f0 = faults()
    const b0 = servers.length ? await scrapeServers(servers) : undefined
    const r =
      PROFILE_DIR && rate === PROFILE_AT && servers.length
        ? await profiled(name, servers, () => gen.step(rate, SECONDS))
        : await gen.step(rate, SECONDS)
    if (servers.length) {
      r.cpuPerRead = ((cpu() - c0) * 1000) / (r.achieved * SECONDS)
      r.sysPerRead = ((sys() - s0) * 1000) / (r.achieved * SECONDS)
      const b1 = await scrapeServers(servers)
      r.serverP99Within = p99Within(b0!.buckets, b1.buckets)
      r.serverFaultsPerRead = (faults() - f0) / (r.achieved * SECONDS)
      r.serverGc = gcDiff(b0!.gc, b1.gc)
      r.serverLagMaxMs = b1.lagMaxMs
    }
    if (redis) {
      r.redisPerRead = ((await redisCpu(redis)) - r0!) / (r.achieved * SECONDS)
      r.redisFaultsPerRead = (minorFaults(await redisPid(redis)) - rf0!) / (r.achieved * SECONDS)
    }
    results.push(r)
    log(
      `${name} offered ${rate}/s: achieved ${r.achieved.toFixed(0)}/s, p50 ${r.p50.toFixed(2)} ms, ` +
        `p95 ${r.p95.toFixed(2)} ms, p99 ${r.p99.toFixed(2)} ms, errors ${r.errors} (shed ${r.shed}), dropped ${r.dropped}, ` +
        `generator cpu ${(r.generatorCpu * 100).toFixed(0)}%, longest stall ${r.generatorStallMs.toFixed(1)} ms (gc: ${r.generatorGc})` +
        (r.cpuPerRead === undefined
          ? ''
          : `, server cpu ${r.cpuPerRead.toFixed(3)} ms/read (${r.sysPerRead!.toFixed(3)} in the kernel)` +
            `, server-side p99 <= ${r.serverP99Within} ms, server minor faults ${r.serverFaultsPerRead!.toFixed(2)}/read, ` +
            `server gc ${r.serverGc}, server longest loop delay ${r.serverLagMaxMs!.toFixed(1)} ms`) +
        (r.redisPerRead === undefined
          ? ''
          : `, redis cpu ${r.redisPerRead.toFixed(3)} ms/read, redis minor faults ${r.redisFaultsPerRead!.toFixed(2)}/read`),
    )
    // Past its capacity a side is done: under half the rate answered, or a p99 past 100 ms with
    // the median past the goal too or answers missing (one stall of the host, which lifts only
    // the tail, does not end a sweep). Every side runs up to 100 req/s, the summary's step.
    const saturated = r.p50 > P99_GOAL_MS || r.achieved < 0.98 * rate
    if (rate >= 100 && (r.achieved < 0.5 * rate || (r.p99 > 10 * P99_GOAL_MS && saturated))) break
  }
  if (servers.length && OVERLOAD) {
    // Twice the highest load it served in full: past capacity, reads must be refused
    // (resource_exhausted) while the answered ones stay fast, not all slowed or moved to SQL.
    const held = Math.max(
      0,
      ...results.filter((r) => r.achieved >= 0.95 * r.offered).map((r) => r.offered),
    )
    if (held) {
      const rate = 2 * held
      const before = await storePaths(servers)
      const r = await gen.step(rate, SECONDS)
      const paths = diffPaths(before, await storePaths(servers))
      overloadSteps[name] = { ...r, paths }
      log(
        `${name} overload step, offered ${rate}/s (2× ${held}): answered ${r.achieved.toFixed(0)}/s, ` +
          `p50 ${r.p50.toFixed(2)} ms, p99 ${r.p99.toFixed(2)} ms of the answered, shed ${r.shed}, ` +
          `other errors ${r.errors - r.shed}, dropped ${r.dropped}; reads by path ${JSON.stringify(paths)}`,
      )
    }
  }
  return results
}

/** The servers' timeline reads by path and reason, summed over servers. */
async function storePaths(servers: Ours[]): Promise<Record<string, number>> {
  const out: Record<string, number> = {}
  for (const { child } of servers) {
    const text = await (await fetch(`${child.url}/metrics`)).text()
    for (const m of text.matchAll(
      /^openplane_timeline_reads_total\{path="(\w+)",reason="(\w*)"\} (\d+)/gm,
    )) {
      const key = m[2] ? `${m[1]}:${m[2]}` : m[1]!
      out[key] = (out[key] ?? 0) + Number(m[3])
    }
  }
  return out
}

function diffPaths(a: Record<string, number>, b: Record<string, number>): Record<string, number> {
  return Object.fromEntries(
    Object.entries(b)
      .map(([k, v]) => [k, v - (a[k] ?? 0)])
      .filter(([, v]) => v),
  )
}

/** Runs a step while each server records a CPU profile; saves and summarises them. */
async function profiled(
  name: string,
  servers: Ours[],
  work: () => Promise<StepResult>,
): Promise<StepResult> {
  let run: Promise<StepResult> | undefined
  const profiles = await Promise.all(
    servers.map((s, i) =>
      profileWhile(
        s.inspectPort,
        () => {
          // The first profiler to start runs the step; the others record while it runs.
          if (i === 0) run = work()
          return waitFor(() => run)
        },
        200,
        PROFILE_ALLOCATIONS,
      ),
    ),
  )
  const result = await run!
  mkdirSync(PROFILE_DIR!, { recursive: true })
  profiles.forEach(({ profile, heap }, i) => {
    const file = path.join(PROFILE_DIR!, `${name}-server${i + 1}-${PROFILE_AT}rps.cpuprofile`)
    writeFileSync(file, JSON.stringify(profile))
    const reads = Math.round((result.achieved * SECONDS) / servers.length)
    log(`profile of server ${i + 1} (about ${reads} reads):\n${summarise(file, 30, reads)}`)
    if (heap) {
      const heapFile = file.replace(/\.cpuprofile$/, '.heapprofile')
      writeFileSync(heapFile, JSON.stringify(heap))
      log(`allocations of server ${i + 1}:\n${summariseAllocations(heapFile, 25, reads)}`)
    }
  })
  return result
}

/** prom-client's event-loop delay sampling interval (its default, which telemetry keeps). */
const LAG_SAMPLE_MS = 10

/** What the servers' metrics say, summed over them; read at a step's start and end. */
interface ServerScrape {
  /**
   * GetTimeline answers (ok) by the servers' own latency buckets (openplane_rpc_duration_seconds:
   * from the request's arrival to its answer, so without the generator's or the kernel's share):
   * bucket bound in seconds → cumulative count.
   */
  buckets: Map<number, number>
  /** GC pauses so far and their seconds, by kind (minor, major, incremental, weakcb). */
  gc: Map<string, { n: number; s: number }>
  /**
   * The longest event-loop delay since the last scrape (the metric resets when read), ms:
   * prom-client's, less the 10 ms interval it samples at, which its values include (an idle
   * loop reads 10 ms).
   */
  lagMaxMs: number
}

async function scrapeServers(servers: Ours[]): Promise<ServerScrape> {
  const out: ServerScrape = { buckets: new Map(), gc: new Map(), lagMaxMs: 0 }
  for (const { child } of servers) {
    const text = await (await fetch(`${child.url}/metrics`)).text()
    for (const m of text.matchAll(/^openplane_rpc_duration_seconds_bucket\{([^}]*)\} (\d+)/gm)) {
      const labels = m[1]!
      if (!labels.includes('method="GetTimeline"') || !labels.includes('code="ok"')) continue
      const le = /le="([^"]+)"/.exec(labels)?.[1]
      if (le === undefined) continue
      const bound = le === '+Inf' ? Infinity : Number(le)
      out.buckets.set(bound, (out.buckets.get(bound) ?? 0) + Number(m[2]))
    }
    for (const m of text.matchAll(
      /^openplane_nodejs_gc_duration_seconds_(sum|count)\{kind="(\w+)"\} ([\d.e+-]+)$/gm,
    )) {
      const t = out.gc.get(m[2]!) ?? { n: 0, s: 0 }
      if (m[1] === 'sum') t.s += Number(m[3])
      else t.n += Number(m[3])
      out.gc.set(m[2]!, t)
    }
    const lag = /^openplane_nodejs_eventloop_lag_max_seconds ([\d.e+-]+)$/m.exec(text)
    out.lagMaxMs = Math.max(out.lagMaxMs, Number(lag?.[1] ?? 0) * 1000 - LAG_SAMPLE_MS)
  }
  return out
}

/** GC pauses between two scrapes, by kind: "minor 12× 30 ms, major 1× 9 ms". */
function gcDiff(before: ServerScrape['gc'], after: ServerScrape['gc']): string {
  const parts: string[] = []
  for (const [kind, t] of after) {
    const b = before.get(kind) ?? { n: 0, s: 0 }
    if (t.n > b.n) parts.push(`${kind} ${t.n - b.n}× ${((t.s - b.s) * 1000).toFixed(0)} ms`)
  }
  return parts.join(', ') || 'none'
}

/** The smallest bucket bound (ms) within which 99% of the answers between two scrapes fell. */
function p99Within(before: Map<number, number>, after: Map<number, number>): number {
  const bounds = [...after.keys()].sort((a, b) => a - b)
  const all = (after.get(Infinity) ?? 0) - (before.get(Infinity) ?? 0)
  for (const bound of bounds) {
    if ((after.get(bound) ?? 0) - (before.get(bound) ?? 0) >= 0.99 * all) return bound * 1000
  }
  return Infinity
}

/** The promise `get` returns once it returns one (the step another profiler started). */
async function waitFor<T>(get: () => Promise<T> | undefined): Promise<T> {
  for (;;) {
    const p = get()
    if (p) return p
    await new Promise((r) => setTimeout(r, 5))
  }
}

/** Redis's process id (it runs on this machine: the bench offers load on loopback only). */
async function redisPid(redis: Pick<RedisServer, 'cli'>): Promise<number> {
  return Number(/process_id:(\d+)/.exec(await redis.cli('INFO', 'server'))?.[1] ?? NaN)
}

/** Redis's own CPU so far (user and system), ms: what the reads cost it, step by step. */
async function redisCpu(redis: Pick<RedisServer, 'cli'>): Promise<number> {
  const info = await redis.cli('INFO', 'cpu')
  const field = (name: string) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? NaN)
  return (field('used_cpu_user') + field('used_cpu_sys')) * 1000
}

/**
 * A Redis the caller runs (BENCH_REDIS=host:port), kept after the run with its timelines, so
 * a rerun skips rebuilding them from Postgres. Only for iterating on our side.
 */
export function keptRedis(at: string): BenchRedis {
  // A socket's path: our servers reach that Redis through it (DATAPLANE_REDIS_NODES takes one).
  if (at.startsWith('/')) {
    return {
      nodes: at,
      cli: async (...args) => execFileSync('redis-cli', ['-s', at, ...args]).toString(),
      dispose: async () => {},
    }
  }
  const [host = '127.0.0.1', port = '6379'] = at.split(':')
  return {
    nodes: `${host}:${port}`,
    cli: async (...args) => execFileSync('redis-cli', ['-h', host, '-p', port, ...args]).toString(),
    dispose: async () => {},
  }
}

/** The bench's Redis: what DATAPLANE_REDIS_NODES names it by, and redis-cli against it. */
export type BenchRedis = Pick<RedisServer, 'cli' | 'dispose'> & { nodes: string }

/** A private Redis for one run. */
export async function benchRedis(): Promise<BenchRedis> {
  const redis = await startRedisServer()
  return { ...redis, nodes: `${redis.host}:${redis.port}` }
}

const maxHolding = (results: StepResult[]): number =>
  Math.max(
    0,
    ...results
      .filter((r) => r.p99 <= P99_GOAL_MS && r.achieved >= 0.95 * r.offered && !r.errors)
      .map((r) => r.offered),
  )

export async function spawnStock(
  schema: string,
  extra: Record<string, string> = {},
): Promise<Child> {
  const port = await freePort()
  return spawnReady(
    ['tests/bench/stock-dataplane.ts'],
    { DB_POSTGRES_URL: PG_URL, DB_POSTGRES_SCHEMA: schema, PORT: String(port), ...extra },
    `http://127.0.0.1:${port}`,
    '/',
    // It serves rpcs only: any HTTP answer means it listens.
    () => true,
  )
}

export interface Ours {
  child: Child
  /** Its inspector, listening from the start (no session attached until a profile is taken). */
  inspectPort: number
}

export async function spawnOurs(
  schema: string,
  redis: Pick<BenchRedis, 'nodes'>,
  firehose: string,
  indexer = true,
  extra: Record<string, string> = {},
): Promise<Ours> {
  const port = await freePort()
  const inspectPort = await freePort()
  const inspect = PROFILE_DIR ? [`--inspect=127.0.0.1:${inspectPort}`] : []
  const child = await spawnReady(
    [...inspect, ...NODE_FLAGS, 'packages/cli/src/main.ts', 'start'],
    {
      DB_POSTGRES_URL: PG_URL,
      DB_POSTGRES_SCHEMA: schema,
      DATAPLANE_PORT: String(port),
      DATAPLANE_FIREHOSE_URLS: firehose,
      DATAPLANE_TIMELINES: 'redis',
      DATAPLANE_REDIS_NODES: redis.nodes,
      DATAPLANE_INDEXER: String(indexer),
      LOG_LEVEL: 'warn',
      ...extra,
    },
    `http://127.0.0.1:${port}`,
    '/_health',
    undefined,
    // The indexer's process loads the 5.36M-follow graph before it listens (47 s on one host).
    300_000,
  )
  // A server without the indexer serves from Postgres until its graph is loaded.
  for (let i = 0; !indexer; i++) {
    const health = (await (await fetch(`${child.url}/_health`)).json()) as {
      dependencies?: { graphFeed?: { ok?: boolean } }
    }
    if (health.dependencies?.graphFeed?.ok) break
    if (i > 600) throw new Error('the second server did not load its graph in 5 minutes')
    await new Promise((r) => setTimeout(r, 500))
  }
  return { child, inspectPort }
}

async function main(): Promise<void> {
  const params = await readUserbaseParams(path.resolve(root, USERBASE))
  const schema = process.env.BENCH_SCHEMA ?? benchSchema(params.num_users)
  await ensureLoaded(schema)
  if (process.env.BENCH_ONLY === 'load') return
  const active = params.max_active_user_id
  const count = Math.min(active, Number(process.env.BENCH_READERS ?? active))
  // A fixed shuffle of the active users, so both sides get the same request sequence.
  const readers = benchReaders(active, count)
  const only = process.env.BENCH_ONLY
  const cpuModel = execFileSync('sh', ['-c', "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"])
    .toString()
    .trim()
  log(
    `${params.num_users} users, density ${params.follower_density}, ${count} readers, ${SECONDS} s per step, ${cpuModel}`,
  )

  const results: Record<string, StepResult[]> = {}
  const seq: Record<string, number> = {}
  /** Ours' sequential p50 through the AppView's client (seq holds the lean client's). */
  const seqVia: Record<string, number> = {}
  if (only !== 'ours') {
    const stock = await spawnStock(schema)
    // The stock dataplane's server speaks HTTP/1.1 only.
    const gen = startGenerator({ kind: 'grpc', urls: [stock.url], httpVersion: '1.1' }, readers)
    try {
      // One pass first: both sides start with a warm Postgres cache.
      await gen.all()
      seq.stock = await gen.sequential(SEQUENTIAL)
      log(`stock: sequential p50 ${seq.stock.toFixed(3)} ms`)
      results.stock = await sweep('stock', gen)
    } finally {
      await gen.close()
      await stock.stop()
    }
  }
  if (only !== 'stock') {
    const redis = KEEP_REDIS ? keptRedis(KEEP_REDIS) : await benchRedis()
    const servers: Ours[] = []
    try {
      for (const n of SERVERS) {
        // No firehose to follow here: a closed local port, retried with backoff.
        while (servers.length < n) {
          const t0 = performance.now()
          servers.push(
            await spawnOurs(schema, redis, `ws://127.0.0.1:${await freePort()}`, !servers.length),
          )
          log(`server ${servers.length} ready in ${((performance.now() - t0) / 1000).toFixed(1)} s`)
        }
        const name = `ours×${n}`
        const urls = servers.map((s) => s.child.url)
        const frames = readers.map((r) => timelineRequestFrame(r))
        const raw = startGenerator({ kind: 'h2', urls, sessions: RAW_SESSIONS, frames }, readers)
        const connect = startGenerator({ kind: 'grpc', urls, httpVersion: '2' }, readers)
        const gen = DRIVER === 'raw' ? raw : connect
        try {
          // Active readers: their timelines materialise on first read.
          const t0 = performance.now()
          for (let pass = 0; pass < 2; pass++) await gen.all()
          log(
            `${name}: warmed ${readers.length} timelines in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
          )
          await (gen === raw ? connect : raw).all()
          // Sequential through both clients: the lean one shows the server's latency, the
          // AppView's own what a caller like it sees.
          seq[name] = await raw.sequential(SEQUENTIAL)
          const seqConnect = await connect.sequential(SEQUENTIAL)
          seqVia[name] = seqConnect
          log(
            `${name}: sequential p50 ${seq[name].toFixed(3)} ms (lean client), ${seqConnect.toFixed(3)} ms (the AppView's client)`,
          )
          results[name] = await sweep(name, gen, servers, redis)
        } finally {
          await raw.close()
          await connect.close()
        }
        for (const { child: c } of servers) {
          const metrics = await (await fetch(`${c.url}/metrics`)).text()
          log(
            `${c.url}: rss ${(rss(c.proc.pid!) / 2 ** 20).toFixed(0)} MiB\n` +
              metrics
                .split('\n')
                .filter((l) =>
                  /^openplane_(timeline_reads_total|graph_edges|graph_reads_total|rpcs_shed_total)/.test(
                    l,
                  ),
                )
                .join('\n'),
          )
        }
      }
      const mem = await redis.cli('INFO', 'memory')
      log(`redis ${/used_memory_human:(\S+)/.exec(mem)?.[1]} for ${readers.length} timelines`)
    } finally {
      for (const [i, s] of [...servers.entries()].reverse()) {
        await s.child.stop()
        if (SERVER_OUTPUT) {
          mkdirSync(SERVER_OUTPUT, { recursive: true })
          writeFileSync(path.join(SERVER_OUTPUT, `server-${i + 1}.log`), s.child.output())
        }
      }
      await redis.dispose()
    }
  }

  const sides = Object.keys(results)
  console.log(
    `\n| offered req/s | ${sides.map((n) => `${n} achieved | ${n} p50 / p95 / p99 ms`).join(' | ')} |`,
  )
  console.log(`| ---: | ${sides.map(() => '---: | ---:').join(' | ')} |`)
  for (const rate of RATES) {
    const row = sides.map((n) => {
      const r = results[n]!.find((x) => x.offered === rate)
      return r
        ? `${r.achieved.toFixed(0)} | ${r.p50.toFixed(2)} / ${r.p95.toFixed(2)} / ${r.p99.toFixed(2)}`
        : '— | —'
    })
    if (row.every((c) => c === '— | —')) continue
    console.log(`| ${rate} | ${row.join(' | ')} |`)
  }
  for (const n of sides) {
    const cpu = results[n]!.map((r) => r.cpuPerRead).filter((x): x is number => x !== undefined)
    const rcpu = results[n]!.map((r) => r.redisPerRead).filter((x) => x !== undefined)
    console.log(
      `${n}: sequential p50 ${seq[n]?.toFixed(3)} ms` +
        (seqVia[n] === undefined ? '' : ` (${seqVia[n].toFixed(3)} ms through Connect)`) +
        `, max rps at p99<=${P99_GOAL_MS}ms ${maxHolding(results[n]!)}` +
        (cpu.length ? `, server cpu per read ${cpu.map((c) => c.toFixed(2)).join('/')} ms` : '') +
        (rcpu.length ? `, redis cpu per read ${rcpu.map((c) => c.toFixed(2)).join('/')} ms` : ''),
    )
  }
  for (const [n, r] of Object.entries(overloadSteps)) {
    console.log(
      `${n} overload: offered ${r.offered}/s, answered ${r.achieved.toFixed(0)}/s at p50/p99 ` +
        `${r.p50.toFixed(2)}/${r.p99.toFixed(2)} ms, shed ${r.shed}, other errors ${r.errors - r.shed}, ` +
        `dropped ${r.dropped}, reads ${JSON.stringify(r.paths)}`,
    )
  }
  // openplane: the better of its setups (most rps holding the goal, then lower p99 at 100).
  const ours = sides
    .filter((n) => n !== 'stock')
    .sort(
      (a, b) =>
        maxHolding(results[b]!) - maxHolding(results[a]!) ||
        at100(results[a]!) - at100(results[b]!),
    )[0]
  const stock100 = results.stock ? at100(results.stock) : NaN
  const ours100 = ours ? at100(results[ours]!) : NaN
  log(`openplane below is ${ours}`)
  // The summary compares 100 req/s; on a slow host the stock is already past its capacity
  // there, which flatters the ratio. Say so, with the ratio at the highest step it held.
  if (results.stock && ours) {
    const held = results.stock.filter(
      (r) => r.p99 <= 10 * P99_GOAL_MS && r.achieved >= 0.98 * r.offered,
    )
    const top = held.filter((r) => r.offered < 100).at(-1)
    const mine = top && results[ours]!.find((r) => r.offered === top.offered)
    const ran100 = results.stock.some((r) => r.offered === 100)
    if (ran100 && !held.some((r) => r.offered === 100)) {
      log(
        top && mine
          ? `the stock did not hold 100 req/s here (p99 over ${10 * P99_GOAL_MS} ms or under 98 % answered); ` +
              `at ${top.offered} req/s, its highest step held: p99 stock ${top.p99.toFixed(2)} ms, ` +
              `openplane ${mine.p99.toFixed(2)} ms, ratio ${(top.p99 / mine.p99).toFixed(1)}x`
          : 'the stock held none of the steps below 100 req/s (p99 under 100 ms, 98 % answered)',
      )
    }
  }
  console.log(
    `timeline: at 100 rps p99 stock ${stock100.toFixed(2)} ms, openplane ${ours100.toFixed(2)} ms, ` +
      `ratio ${(stock100 / ours100).toFixed(1)}x; openplane max rps at p99<=10ms ${ours ? maxHolding(results[ours]!) : NaN}`,
  )
}

/** p99 of the 100 req/s step (NaN if it was not run). */
function at100(results: StepResult[]): number {
  return results.find((r) => r.offered === 100)?.p99 ?? NaN
}

if (import.meta.main) await main()

// pnpm bench:timeline — GetTimeline on the stock dataplane vs ours, side by side on the same
// Postgres data: a power-law userbase from the toolkit (100k users, density 5, a week of posts by
// default), loaded once into a kept schema. Both dataplanes run as their own processes; this
// process offers GetTimeline at fixed rates (open loop: requests leave on schedule whether or not
// earlier ones came back) for active readers, over gRPC as the AppView calls each (HTTP/1.1 to the stock's server, which has
// no HTTP/2; HTTP/2 to ours), and
// prints p50/p95/p99, achieved throughput and the highest offered rate each side holds with
// p99 <= 10 ms. Ours runs with its production defaults (Redis timelines, celebrity threshold
// 10 000 followers, lossy limit 2 000 follows). Not part of CI.
//
//   BENCH_USERBASE  userbase parameter file (default packages/sim/examples/userbase-100k-with-posts.json)
//   BENCH_SCHEMA    schema to load into / reuse (default bench_tl_<num_users in letters: the stock
//                   dataplane accepts [A-Za-z_] only>, e.g. bench_tl_baaaaa for 100000)
//   BENCH_RATES     offered loads, req/s (default 25,50,100,200,400,800,1600,3200)
//   BENCH_SECONDS   seconds per load step (default 10)
//   BENCH_READERS   active readers drawn from users 1..max_active_user_id (default all of them)
//   BENCH_ONLY      stock | ours | load (load the data and stop; default: both sides)
import { execFileSync } from 'node:child_process'
import path from 'node:path'
import { performance } from 'node:perf_hooks'
import { BasicHostList, createDataPlaneClient } from '@atproto/bsky'
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

const root = path.resolve(import.meta.dirname, '../..')
const USERBASE = process.env.BENCH_USERBASE ?? 'packages/sim/examples/userbase-100k-with-posts.json'
const RATES = (process.env.BENCH_RATES ?? '25,50,100,200,400,800,1600,3200').split(',').map(Number)
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10)
const P99_GOAL_MS = 10
const MAX_IN_FLIGHT = 4000

const log = (...a: unknown[]) => console.log('[bench:timeline]', ...a)

type Client = ReturnType<typeof createDataPlaneClient>

interface StepResult {
  offered: number
  achieved: number
  p50: number
  p95: number
  p99: number
  errors: number
  dropped: number
  /** This process's CPU over the step, as a share of one core. */
  generatorCpu: number
}

async function ensureLoaded(schema: string): Promise<void> {
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

/** Every reader's first page, a few requests at a time. */
async function readAll(client: Client, readers: string[]): Promise<void> {
  for (let i = 0; i < readers.length; i += 8) {
    await Promise.all(
      readers
        .slice(i, i + 8)
        .map((r) => client.getTimeline({ actorDid: r, limit: 50, cursor: '' })),
    )
  }
}

/** The default schema name: digits spelled as letters a–j. */
export function benchSchema(users: number): string {
  return `bench_tl_${String(users).replace(/\d/g, (d) => 'abcdefghij'[Number(d)]!)}`
}

function quantile(sorted: Float64Array, q: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]! : NaN
}

/** Offers `rate` req/s for `seconds`, each for a reader drawn in a fixed sequence. */
async function step(
  client: Client,
  readers: string[],
  rate: number,
  seconds: number,
): Promise<StepResult> {
  const latencies: number[] = []
  let errors = 0
  let dropped = 0
  let inFlight = 0
  let sent = 0
  const total = Math.round(rate * seconds)
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  const done: Promise<void>[] = []
  await new Promise<void>((resolve) => {
    const tick = () => {
      const due = Math.min(total, Math.floor(((performance.now() - t0) / 1000) * rate))
      while (sent < due) {
        const reader = readers[sent % readers.length]!
        sent++
        if (inFlight >= MAX_IN_FLIGHT) {
          dropped++
          continue
        }
        inFlight++
        const start = performance.now()
        done.push(
          client
            .getTimeline({ actorDid: reader, limit: 50, cursor: '' })
            .then(
              () => void latencies.push(performance.now() - start),
              () => void errors++,
            )
            .finally(() => inFlight--),
        )
      }
      if (sent >= total) return resolve()
      // Sleep until the next request is due (no spinning: the generator shares the cores).
      const next = t0 + ((sent + 1) / rate) * 1000
      setTimeout(tick, Math.max(0, next - performance.now()))
    }
    tick()
  })
  await Promise.all(done)
  const elapsed = (performance.now() - t0) / 1000
  const cpu = process.cpuUsage(cpu0)
  const sorted = Float64Array.from(latencies).sort()
  return {
    offered: rate,
    achieved: latencies.length / elapsed,
    p50: quantile(sorted, 0.5),
    p95: quantile(sorted, 0.95),
    p99: quantile(sorted, 0.99),
    errors,
    dropped,
    generatorCpu: (cpu.user + cpu.system) / 1e6 / elapsed,
  }
}

/** Steps up the offered load until p99 exceeds the goal or throughput falls behind. */
async function sweep(name: string, client: Client, readers: string[]): Promise<StepResult[]> {
  const results: StepResult[] = []
  for (const rate of RATES) {
    const r = await step(client, readers, rate, SECONDS)
    results.push(r)
    log(
      `${name} offered ${rate}/s: achieved ${r.achieved.toFixed(0)}/s, p50 ${r.p50.toFixed(2)} ms, ` +
        `p95 ${r.p95.toFixed(2)} ms, p99 ${r.p99.toFixed(2)} ms, errors ${r.errors}, dropped ${r.dropped}, ` +
        `generator cpu ${(r.generatorCpu * 100).toFixed(0)}%`,
    )
    if (r.p99 > 10 * P99_GOAL_MS || r.achieved < 0.5 * rate) break
  }
  return results
}

const maxHolding = (results: StepResult[]): number =>
  Math.max(
    0,
    ...results
      .filter((r) => r.p99 <= P99_GOAL_MS && r.achieved >= 0.95 * r.offered && !r.errors)
      .map((r) => r.offered),
  )

async function spawnStock(schema: string): Promise<Child> {
  const port = await freePort()
  return spawnReady(
    ['tests/bench/stock-dataplane.ts'],
    { DB_POSTGRES_URL: PG_URL, DB_POSTGRES_SCHEMA: schema, PORT: String(port) },
    `http://127.0.0.1:${port}`,
    '/',
    // It serves rpcs only: any HTTP answer means it listens.
    () => true,
  )
}

async function spawnOurs(schema: string, redis: RedisServer, firehose: string): Promise<Child> {
  const port = await freePort()
  return spawnReady(
    ['packages/cli/src/main.ts', 'start'],
    {
      DB_POSTGRES_URL: PG_URL,
      DB_POSTGRES_SCHEMA: schema,
      DATAPLANE_PORT: String(port),
      DATAPLANE_FIREHOSE_URLS: firehose,
      DATAPLANE_TIMELINES: 'redis',
      DATAPLANE_REDIS_NODES: `${redis.host}:${redis.port}`,
      LOG_LEVEL: 'warn',
    },
    `http://127.0.0.1:${port}`,
    '/_health',
  )
}

async function main(): Promise<void> {
  const params = await readUserbaseParams(path.resolve(root, USERBASE))
  const schema = process.env.BENCH_SCHEMA ?? benchSchema(params.num_users)
  await ensureLoaded(schema)
  if (process.env.BENCH_ONLY === 'load') return
  const active = params.max_active_user_id
  const count = Math.min(active, Number(process.env.BENCH_READERS ?? active))
  // A fixed shuffle of the active users, so both sides get the same request sequence.
  const readers = Array.from({ length: count }, (_, i) => didFor(1 + ((i * 7919) % active)))
  const only = process.env.BENCH_ONLY
  const cpuModel = execFileSync('sh', ['-c', "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"])
    .toString()
    .trim()
  log(
    `${params.num_users} users, density ${params.follower_density}, ${count} readers, ${SECONDS} s per step, ${cpuModel}`,
  )

  const results: Record<string, StepResult[]> = {}
  if (only !== 'ours') {
    const stock = await spawnStock(schema)
    try {
      // The stock dataplane's server speaks HTTP/1.1 only.
      const client = createDataPlaneClient(new BasicHostList([stock.url]), { httpVersion: '1.1' })
      // One pass first: both sides start with a warm Postgres cache.
      await readAll(client, readers)
      results.stock = await sweep('stock', client, readers)
    } finally {
      await stock.stop()
    }
  }
  if (only !== 'stock') {
    const redis = await startRedisServer()
    // No firehose to follow here: a closed local port, retried with backoff.
    const ours = await spawnOurs(schema, redis, `ws://127.0.0.1:${await freePort()}`)
    try {
      const client = createDataPlaneClient(new BasicHostList([ours.url]), { httpVersion: '2' })
      // Active readers: their timelines materialise on first read (rebuilt in the background).
      const t0 = performance.now()
      for (let pass = 0; pass < 2; pass++) await readAll(client, readers)
      log(`warmed ${readers.length} timelines in ${((performance.now() - t0) / 1000).toFixed(1)} s`)
      const metrics = await (await fetch(`${ours.url}/metrics`)).text()
      log(
        metrics
          .split('\n')
          .filter((l) => l.startsWith('openplane_timeline_reads_total'))
          .join('\n'),
      )
      results.ours = await sweep('ours', client, readers)
      const after = await (await fetch(`${ours.url}/metrics`)).text()
      log(
        after
          .split('\n')
          .filter((l) => l.startsWith('openplane_timeline_reads_total'))
          .join('\n'),
      )
      const mem = await redis.cli('INFO', 'memory')
      log(`redis ${/used_memory_human:(\S+)/.exec(mem)?.[1]} for ${readers.length} timelines`)
    } finally {
      await ours.stop()
      await redis.dispose()
    }
  }

  console.log(
    '\n| offered req/s | stock achieved | stock p50 / p95 / p99 ms | ours achieved | ours p50 / p95 / p99 ms | p99 ratio |',
  )
  console.log('| ---: | ---: | ---: | ---: | ---: | ---: |')
  for (const rate of RATES) {
    const s = results.stock?.find((r) => r.offered === rate)
    const o = results.ours?.find((r) => r.offered === rate)
    if (!s && !o) continue
    const fmt = (r?: StepResult) =>
      r
        ? [
            `${r.achieved.toFixed(0)}`,
            `${r.p50.toFixed(2)} / ${r.p95.toFixed(2)} / ${r.p99.toFixed(2)}`,
          ]
        : ['—', '—']
    const ratio = s && o ? `${(s.p99 / o.p99).toFixed(1)}×` : '—'
    console.log(`| ${rate} | ${fmt(s).join(' | ')} | ${fmt(o).join(' | ')} | ${ratio} |`)
  }
  const ms = results.stock ? maxHolding(results.stock) : NaN
  const mo = results.ours ? maxHolding(results.ours) : NaN
  console.log(
    `\nmax offered load with p99 <= ${P99_GOAL_MS} ms: stock ${ms}/s, ours ${mo}/s` +
      (ms && mo ? ` (${(mo / ms).toFixed(1)}×)` : ''),
  )
}

if (import.meta.main) await main()

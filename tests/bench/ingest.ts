// pnpm bench:ingest — events/s fully indexed from the same recorded firehose by the stock indexer
// (@atproto/bsky RepoSubscription, as the stock dataplane runs it) and by ours, one after the
// other on this machine, each into its own fresh schema of the same Postgres; then every indexed
// table is diffed between the two. The corpus is the toolkit's realistic network stream
// (`pnpm sim record-firehose`), recorded once and kept under .data/corpus; a replay server in its
// own process serves it at full speed together with the users' identities. Not part of CI.
//
//   BENCH_EVENTS (default 500000), BENCH_REPOS (default 100000), BENCH_SEED (default 1): the
//     corpus generated when BENCH_CORPUS is not given (reused if already recorded)
//   BENCH_CORPUS   a recorded corpus file to use instead
//   BENCH_BATCH    our batch size (default 2000, the dataplane's DATAPLANE_BATCH_SIZE default)
//   BENCH_VERIFY   1: ours checks every commit's signature and MST proofs (the stock trusts the
//     relay either way)
//   BENCH_SIDES    "stock,openplane" (default) or one of them
//   BENCH_DECODE_WORKERS  our decode threads (default 1, the dataplane's default on two cores)
//   BENCH_TX_THREAD  0: ours writes batches on the writer's thread, not the transaction thread
//   BENCH_FLOOR    0: skip the Postgres floor (the rows ours ended with, stored again alone)
//   BENCH_STOCK_INFLIGHT  events the stock may have received and not yet handled (default 10000);
//     it has no backpressure of its own (see pacing-relay.ts)
//   BENCH_KEEP_SCHEMAS  keep both schemas for inspection (dropped by default)
//   BENCH_PROGRESS_SECONDS  seconds between progress lines (default 10)
//   BENCH_KEPT_ROWS  keys whose committed rows our writer keeps between batches (default the
//     writer's; 0: none, every read asked of Postgres)
//   OPENPLANE_TEST_PG_URL (`pnpm bench:ingest` sets it to a Postgres of its own: bench/with-postgres.ts)
import { performance, type EventLoopUtilization } from 'node:perf_hooks'
import { Database, RepoSubscription } from '@atproto/bsky'
import { IdResolver } from '@atproto/identity'
import pg from 'pg'
import { createPgDb, migrateToLatest } from '@openplane/db'
import { registry } from '@openplane/telemetry'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { formatTableDiff, INDEXED_TABLES, startIndexerOn, tableDiffs } from '../harness/indexer.ts'
import { freePort, spawnReady } from '../harness/processes.ts'
import { dropSchemas } from '../harness/stock-network.ts'
import { wellKnown } from '../harness/well-known.ts'
import { benchCorpus } from './corpus.ts'
import { cpuByName, processCpu } from './proc.ts'
import { countStatements } from './statements.ts'
import { startPacingRelay } from './pacing-relay.ts'
import { postgresFloor } from './pg-floor.ts'
import { stageProfile } from './stages.ts'
import { classifyStockRaces } from './stock-races.ts'

type Runner = { trackEvent: (...args: unknown[]) => Promise<void> }

const EVENTS = Number(process.env.BENCH_EVENTS ?? 500_000)
const REPOS = Number(process.env.BENCH_REPOS ?? 100_000)
const SEED = Number(process.env.BENCH_SEED ?? 1)
const BATCH = Number(process.env.BENCH_BATCH ?? 2000)
const DECODE_WORKERS = Number(process.env.BENCH_DECODE_WORKERS ?? 1)
const VERIFY = process.env.BENCH_VERIFY === '1'
/** 0: batches written on the writer's own thread, as before the transaction thread. */
const TRANSACTION_THREAD = process.env.BENCH_TX_THREAD !== '0'
const STOCK_INFLIGHT = Number(process.env.BENCH_STOCK_INFLIGHT ?? 10_000)
const PROGRESS_SECONDS = Math.max(1, Number(process.env.BENCH_PROGRESS_SECONDS) || 10)
const KEPT_ROWS = process.env.BENCH_KEPT_ROWS ? Number(process.env.BENCH_KEPT_ROWS) : undefined
const SIDES = new Set((process.env.BENCH_SIDES ?? 'stock,openplane').split(','))
const OURS = VERIFY ? 'openplane (verifying)' : 'openplane'
const log = (...a: unknown[]) => console.log(`[bench:ingest]`, ...a)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

// 1. The corpus.
const { file, summary } = await benchCorpus({ events: EVENTS, repos: REPOS, seed: SEED }, log)
const head = summary.last_seq
log(`corpus ${file}: ${summary.frames} events, seq ${summary.first_seq}…${head}`)

// 2. The replay server, in its own process: its identity answers cost both sides alike.
const port = await freePort()
const replay = await spawnReady(
  ['packages/sim/src/cli.ts', 'serve-firehose', file, '--port', String(port)],
  {},
  `http://127.0.0.1:${port}`,
  '/_replay',
)
const httpUrl = `http://127.0.0.1:${port}`
const wsUrl = `ws://127.0.0.1:${port}`

/** CPU seconds of every postgres process (the server's share of the work). */
const postgresCpu = () => cpuByName('postgres')

const statements = countStatements()

interface SideResult {
  name: string
  schema: string
  seconds: number
  rate: number
  nodeCpu: number
  /**
   * Share of the run this process's event loop was busy (the writer's thread, for ours): below
   * one, the rest it waited on Postgres or on the other threads.
   */
  busy: number
  /** Of nodeCpu, the decode threads' (the rest: the writer's thread and the runtime's). */
  decodeCpu: number
  pgCpu: number
  /** The replay server's: the stream served and the identities answered, on the same cores. */
  replayCpu: number
  statements: number
}

/**
 * Runs a side with what it cost: each process's CPU and the statements, from the moment the side
 * calls `start` (set up and its threads loaded: start-up is no cost per event) to its end, and
 * the seconds over the same window.
 */
async function measure(
  name: string,
  schema: string,
  run: (progress: () => number, start: () => void) => Promise<void>,
): Promise<SideResult> {
  await checkpoint()
  // Nothing is decoded before the indexer starts reading (the decode threads count their
  // decoding, not their loading), so the counter is read here, before the clock.
  const decode0 = await decodeCpu()
  let clock:
    | {
        cpu: NodeJS.CpuUsage
        pg: number
        replay: number
        statements: number
        elu: EventLoopUtilization
        t: number
      }
    | undefined
  const start = () => {
    clock = {
      cpu: process.cpuUsage(),
      pg: postgresCpu(),
      replay: processCpu(replay.proc.pid!),
      statements: statements.count(),
      elu: performance.eventLoopUtilization(),
      t: performance.now(),
    }
  }
  await run(() => (clock ? (performance.now() - clock.t) / 1000 : 0), start)
  if (!clock) throw new Error(`${name}: never started its clock`)
  const c = clock
  const seconds = (performance.now() - c.t) / 1000
  const cpu = process.cpuUsage(c.cpu)
  return {
    name,
    schema,
    seconds,
    rate: summary.frames / seconds,
    nodeCpu: (cpu.user + cpu.system) / 1e6,
    busy: performance.eventLoopUtilization(c.elu).utilization,
    decodeCpu: (await decodeCpu()) - decode0,
    pgCpu: postgresCpu() - c.pg,
    replayCpu: processCpu(replay.proc.pid!) - c.replay,
    statements: statements.count() - c.statements,
  }
}

/**
 * Writes out what is dirty in Postgres' cache before a side starts: the side run first leaves
 * its last pages dirty there, and the next one would pay their writes to evict them.
 */
async function checkpoint(): Promise<void> {
  const client = new pg.Client({ connectionString: PG_URL })
  await client.connect()
  try {
    await client.query('checkpoint')
  } catch (err) {
    log(`no checkpoint between the sides (${(err as Error).message})`)
  } finally {
    await client.end()
  }
}

/**
 * A progress line every BENCH_PROGRESS_SECONDS (10 s). The stock's cursor is the oldest event
 * still in flight (its repos run in parallel), so progress is shown as `record` rows written,
 * from Postgres' statistics.
 */
function progressEvery(name: string, schema: string, elapsed: () => number) {
  const client = new pg.Client({ connectionString: PG_URL })
  const ready = client.connect()
  let last = 0
  const timer = setInterval(() => {
    void ready
      .then(() =>
        client.query<{ n: string }>(
          `select coalesce(sum(n_tup_ins), 0) n from pg_stat_user_tables
           where schemaname = $1 and relname = 'record'`,
          [schema],
        ),
      )
      .then(({ rows }) => {
        const n = Number(rows[0]?.n ?? 0)
        log(
          `  ${name}: ${n} records written (${((n - last) / PROGRESS_SECONDS).toFixed(0)}/s, ${elapsed().toFixed(0)} s)`,
        )
        last = n
      })
      .catch(() => undefined)
  }, PROGRESS_SECONDS * 1000)
  return { stop: () => (clearInterval(timer), void client.end().catch(() => undefined)) }
}

const results: SideResult[] = []
const schemas: string[] = []
try {
  // 3. The stock indexer, as the stock dataplane runs it (per-repo parallelism, background
  // recounts), timed until its cursor reaches the head and its queues are drained.
  if (SIDES.has('stock')) {
    const schema = uniqueName('bench_stock')
    schemas.push(schema)
    const db = new Database({ url: PG_URL, schema, poolSize: 10 })
    await db.migrateToLatestOrThrow()
    const idResolver = new IdResolver({ plcUrl: httpUrl, fetch: globalThis.fetch })
    idResolver.handle.resolve = (handle: string) => wellKnown(httpUrl, handle)
    let handled = 0
    const relay = await startPacingRelay(wsUrl, STOCK_INFLIGHT, () => handled)
    const sub = new RepoSubscription({ service: relay.url, db, idResolver })
    log(`stock: indexing (at most ${STOCK_INFLIGHT} events in flight)…`)
    results.push(
      await measure('stock (@atproto/bsky RepoSubscription)', schema, async (elapsed, start) => {
        start()
        await sub.start()
        // Count handled events (the runner resolves trackEvent once an event's handler is done).
        const runner = (sub as unknown as { current: { runner: Runner } }).current.runner
        const track = runner.trackEvent.bind(runner)
        runner.trackEvent = (...args) => {
          const done = track(...args)
          void done.finally(() => handled++)
          return done
        }
        const progress = progressEvery('stock', schema, elapsed)
        while ((sub.getCursor() ?? 0) < head) await sleep(20)
        await sub.processAll()
        progress.stop()
      }),
    )
    await sub.destroy()
    await relay.close()
    await db.close()
  }

  // 4. Ours, in-process, same server, same Postgres; its schema migrated before timing starts,
  // as the stock's is.
  if (SIDES.has('openplane')) {
    const schema = uniqueName('bench_ours')
    schemas.push(schema)
    const pre = createPgDb({ url: PG_URL, schema })
    await migrateToLatest(pre)
    await pre.close()
    log(
      `openplane: indexing (batches of ${BATCH}, ${DECODE_WORKERS} decode workers` +
        `${VERIFY ? ', verifying commits' : ''})…`,
    )
    results.push(
      await measure(OURS, schema, async (elapsed, start) => {
        const ours = await startIndexerOn(
          { source: wsUrl, plcUrl: httpUrl, testPdsUrl: httpUrl, headSeq: async () => head },
          {
            batchSize: BATCH,
            schema,
            verify: VERIFY,
            decodeWorkers: DECODE_WORKERS,
            noTransactionThread: !TRANSACTION_THREAD,
            ...(KEPT_ROWS !== undefined && { keptRows: KEPT_ROWS }),
            // Its threads loaded before the clock, as a running dataplane's are: their modules'
            // loading (about 2 s of CPU here) is no cost per event.
            onReady: start,
          },
        )
        const progress = progressEvery('openplane', schema, elapsed)
        await ours.catchUp()
        progress.stop()
        await ours.close({ keepSchema: true })
      }),
    )
  }

  // 5. Report.
  console.log('')
  console.log(
    '| indexer | events | seconds | events/s | node CPU s | postgres CPU s | replay server CPU s | statements/event |',
  )
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
  for (const r of results) {
    console.log(
      `| ${r.name} | ${summary.frames} | ${r.seconds.toFixed(1)} | ${r.rate.toFixed(0)} | ` +
        `${r.nodeCpu.toFixed(1)} | ${r.pgCpu.toFixed(1)} | ${r.replayCpu.toFixed(1)} | ${(r.statements / summary.frames).toFixed(2)} |`,
    )
  }
  const ours = results.find((r) => r.name === OURS)
  if (ours) {
    console.log(`\n${await stageProfile()}`)
    console.log(`  writer thread's event loop busy: ${(ours.busy * 100).toFixed(0)} % of the run`)
  }
  if (ours && process.env.BENCH_FLOOR !== '0') {
    const floor = await postgresFloor(ours.schema, INDEXED_TABLES, postgresCpu)
    const perEvent = floor.pgCpu / summary.frames
    console.log(
      `\npostgres floor: the ${floor.rows} rows openplane ended with, stored again alone ` +
        `(insert … select, stock indexes): ${floor.seconds.toFixed(1)} s, ` +
        `${floor.pgCpu.toFixed(1)} s of Postgres CPU = ${(perEvent * 1000).toFixed(3)} ms/event ` +
        `(openplane's run: ${((ours.pgCpu / summary.frames) * 1000).toFixed(3)}); ` +
        `10,000 ev/s would need ${(perEvent * 10_000).toFixed(2)} cores of Postgres for that alone`,
    )
  }
  const stock = results.find((r) => r.name !== OURS)
  if (stock && ours) {
    const diffs = await tableDiffs(stock.schema, ours.schema, INDEXED_TABLES)
    // The stock reorders at most the events it has in flight: that many, in stream seconds.
    const streamSeconds = (Date.parse(summary.last_time) - Date.parse(summary.first_time)) / 1000
    const window = STOCK_INFLIGHT / (summary.frames / Math.max(streamSeconds, 1))
    const { races, unexplained } = await classifyStockRaces(
      stock.schema,
      ours.schema,
      diffs,
      window,
    )
    for (const d of unexplained) console.log(formatTableDiff(d, 'stock', 'openplane'))
    if (races.rows) {
      console.log(`stock races (documented, excluded): ${races.rows} rows — ${races.describe()}`)
    }
    const differences = unexplained.reduce((n, d) => n + d.onlyStock.length + d.onlyOurs.length, 0)
    console.log(
      `\ningest: stock ${stock.rate.toFixed(0)} ev/s, openplane ${ours.rate.toFixed(0)} ev/s, ` +
        `ratio ${(ours.rate / stock.rate).toFixed(1)}x, table differences ${differences}; ` +
        cpuPerEvent(ours),
    )
  } else if (ours) {
    console.log(`\ningest: openplane ${ours.rate.toFixed(0)} ev/s; ${cpuPerEvent(ours)}`)
  }
} catch (err) {
  console.error(err)
  process.exitCode = 1
} finally {
  await replay.stop()
  if (process.env.BENCH_KEEP_SCHEMAS) log(`schemas kept: ${schemas.join(', ')}`)
  else await dropSchemas(schemas)
}

/** Our side's CPU per event, each process's (and the decode threads') seconds over the events. */
function cpuPerEvent(r: SideResult): string {
  const us = (seconds: number) => ((seconds / summary.frames) * 1e6).toFixed(0)
  return (
    `cpu us/event writer ${us(r.nodeCpu - r.decodeCpu)}, decode ${us(r.decodeCpu)}, ` +
    `postgres ${us(r.pgCpu)}`
  )
}

/** CPU seconds of our decode threads so far (a metric they report with each reply). */
async function decodeCpu(): Promise<number> {
  const m = await registry.getSingleMetric('openplane_decode_cpu_seconds_total')?.get()
  return (m?.values ?? []).reduce((a, v) => a + v.value, 0)
}

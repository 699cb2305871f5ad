// pnpm bench:backfill — whole repos of the simulated network (the recorded corpus's users, served
// by the toolkit's replay server as listRepos + getRepo, in its own process) indexed by the stock
// and by ours, on the same repos, one after the other; then ours over every repo; then the bytes
// on the wire per event of the network's live stream through the firehose, Jetstream and
// Jetstream+zstd (also alone: pnpm bench:wire).
//
// The stock has no backfill; its nearest path is the repair it runs for one repo,
// IndexingService.indexRepo (fetch the CAR, verify it, diff against `record`, index each record),
// run here over the repos with the same concurrency as ours.
//
//   BENCH_EVENTS, BENCH_REPOS, BENCH_SEED   the corpus (default 500000, 100000, 1: bench:ingest's)
//   BENCH_COMPARE_REPOS   repos both sides index, compared table by table (default 5000)
//   BENCH_CONCURRENCY     repos in flight on each side (default: the backfill's own, 128)
//   BENCH_TX_THREAD       0: ours writes batches on the writer's thread, not the transaction one
//   BENCH_VERIFY          1: ours checks each commit's signature (the stock always does)
//   BENCH_SIDES           "stock,openplane" (default) or one of them
//   BENCH_KEEP_SCHEMAS    1: keep the schemas for inspection
//   BENCH_WHOLE           0: skip ours over every repo (and the wire bytes): side by side only
//   BENCH_FLOOR           0: skip the machine's floor (the repos fetched alone, the rows stored
//                         alone: fetch-floor.ts, pg-floor.ts)
//
// Ends with the side-by-side figures and each process's CPU per record written:
//   backfill: stock <n> rec/s, openplane <n> rec/s, ratio <x>x; cpu us/record openplane <n>, postgres <n>
import { performance } from 'node:perf_hooks'
import { Database, RepoSubscription } from '@atproto/bsky'
import { IdResolver } from '@atproto/identity'
import { Backfill, BACKFILL_DEFAULTS } from '@openplane/backfill'
import { createPgDb, migrateToLatest } from '@openplane/db'
import { IdentityPrefetch, lookupThread, Writer, type LookupThread } from '@openplane/ingest'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { formatTableDiff, INDEXED_TABLES, tableDiffs } from '../harness/indexer.ts'
import { freePort, spawnReady } from '../harness/processes.ts'
import { dropSchemas } from '../harness/stock-network.ts'
import { wellKnown } from '../harness/well-known.ts'
import { benchCorpus } from './corpus.ts'
import { fetchFloor } from './fetch-floor.ts'
import { postgresFloor } from './pg-floor.ts'
import { cpuByName, processCpu } from './proc.ts'
import { stageProfile } from './stages.ts'
import { countStatements } from './statements.ts'
import { measureWire, printWire } from './wire.ts'

const EVENTS = Number(process.env.BENCH_EVENTS ?? 500_000)
const REPOS = Number(process.env.BENCH_REPOS ?? 100_000)
const SEED = Number(process.env.BENCH_SEED ?? 1)
const COMPARE = Number(process.env.BENCH_COMPARE_REPOS ?? 5000)
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? BACKFILL_DEFAULTS.concurrency)
const VERIFY = process.env.BENCH_VERIFY === '1'
const SIDES = new Set((process.env.BENCH_SIDES ?? 'stock,openplane').split(','))
const log = (...a: unknown[]) => console.log(`[bench:backfill]`, ...a)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

const { file, summary } = await benchCorpus({ events: EVENTS, repos: REPOS, seed: SEED }, log)
log(`corpus ${file}: ${summary.frames} events, ${summary.bytes} bytes of frames`)

// The replay server in its own process, keeping each CAR once built: a PDS serves stored blocks,
// so the repos both sides fetch are built and signed before either is timed (warm() below), and
// the server's CPU while a side runs is what serving them costs, printed beside the side's.
const port = await freePort()
const httpUrl = `http://127.0.0.1:${port}`
const replay = await spawnReady(
  [
    'packages/sim/src/cli.ts',
    'serve-firehose',
    file,
    '--port',
    String(port),
    '--serve-repos',
    '--keep-cars',
  ],
  {},
  httpUrl,
  '/_replay',
)
type Status = { repos: { users: number; served: number } | null }
const status = async () => (await (await fetch(`${httpUrl}/_replay`)).json()) as Status
log('replay server: reading the repos from the corpus…')
const t0 = performance.now()
while (!(await status()).repos) await sleep(1000)
log(
  `  ${(await status()).repos!.users} repos ready in ${((performance.now() - t0) / 1000).toFixed(0)} s`,
)

async function listed(): Promise<string[]> {
  const dids: string[] = []
  let cursor: string | undefined
  for (;;) {
    const url = new URL('/xrpc/com.atproto.sync.listRepos', httpUrl)
    url.searchParams.set('limit', '1000')
    if (cursor) url.searchParams.set('cursor', cursor)
    const page = (await (await fetch(url)).json()) as { repos: { did: string }[]; cursor?: string }
    dids.push(...page.repos.map((r) => r.did))
    if (!page.cursor) return dids
    cursor = page.cursor
  }
}
const all = await listed()
const compared = all.slice(0, COMPARE)

/** Has the server build (and keep) each repo's CAR, a few at a time. */
async function warm(dids: string[]): Promise<void> {
  const t = performance.now()
  let next = 0
  const worker = async () => {
    while (next < dids.length) {
      const url = new URL('/xrpc/com.atproto.sync.getRepo', httpUrl)
      url.searchParams.set('did', dids[next++]!)
      await (await fetch(url)).arrayBuffer()
    }
  }
  await Promise.all(Array.from({ length: 4 }, worker))
  log(
    `  ${dids.length} CARs built by the server in ${((performance.now() - t) / 1000).toFixed(0)} s`,
  )
}

interface Run {
  name: string
  schema: string
  repos: number
  records: number
  seconds: number
  bytes: number
  /** CPU seconds of this process (the side's indexer; the replay server is another) and Postgres. */
  nodeCpu: number
  pgCpu: number
  /** CPU seconds of the replay server (serving the CARs and DID documents). */
  serverCpu: number
  statements: number
}

type Timed = 'nodeCpu' | 'pgCpu' | 'serverCpu' | 'statements'

const statements = countStatements()

/**
 * Runs a side, with the CPU seconds it cost this process and Postgres, and its statements, from
 * the moment the side calls `start` (its schema migrated and its threads started: set-up, as the
 * seconds it reports exclude it) to its end.
 */
async function timed(run: (start: () => void) => Promise<Omit<Run, Timed>>): Promise<Run> {
  let cpu0: NodeJS.CpuUsage | undefined
  let pg0 = 0
  let server0 = 0
  let st0 = 0
  const r = await run(() => {
    cpu0 = process.cpuUsage()
    pg0 = cpuByName('postgres')
    server0 = processCpu(replay.proc.pid!)
    st0 = statements.count()
  })
  if (!cpu0) throw new Error(`${r.name}: never started its clock`)
  const cpu = process.cpuUsage(cpu0)
  return {
    ...r,
    nodeCpu: (cpu.user + cpu.system) / 1e6,
    pgCpu: cpuByName('postgres') - pg0,
    serverCpu: processCpu(replay.proc.pid!) - server0,
    statements: statements.count() - st0,
  }
}

async function recordsIn(schema: string): Promise<number> {
  const db = createPgDb({ url: PG_URL, schema, poolSize: 1 })
  try {
    const row = await db.db
      .selectFrom('record')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .executeTakeFirstOrThrow()
    return Number(row.n)
  } finally {
    await db.close()
  }
}

async function stock(dids: string[], start: () => void): Promise<Omit<Run, Timed>> {
  const schema = uniqueName('bench_bf_stock')
  schemas.push(schema)
  const db = new Database({ url: PG_URL, schema, poolSize: 10 })
  await db.migrateToLatestOrThrow()
  const idResolver = new IdResolver({ plcUrl: httpUrl, fetch: globalThis.fetch })
  idResolver.handle.resolve = (handle: string) => wellKnown(httpUrl, handle)
  const sub = new RepoSubscription({ service: httpUrl.replace(/^http/, 'ws'), db, idResolver })
  const served0 = (await status()).repos!.served
  start()
  const t = performance.now()
  let next = 0
  let failed = 0
  const worker = async () => {
    while (next < dids.length) {
      const did = dids[next++]!
      await sub.indexingSvc.indexRepo(did as never).catch(() => failed++)
    }
  }
  const timer = setInterval(() => log(`  stock: ${next}/${dids.length} repos`), 10_000)
  await Promise.all(Array.from({ length: CONCURRENCY }, worker))
  await sub.background.processAll()
  clearInterval(timer)
  const seconds = (performance.now() - t) / 1000
  await db.close()
  if (failed) log(`  stock: ${failed} repos failed`)
  const served = (await status()).repos!.served - served0
  return {
    name: 'stock (IndexingService.indexRepo)',
    schema,
    repos: served,
    records: await recordsIn(schema),
    seconds,
    bytes: 0,
  }
}

const identityOptions = {
  plcUrl: httpUrl,
  allowPrivateNetwork: true,
  testHandles: { suffixes: ['.test'], pdsUrl: httpUrl },
}

/**
 * Our lookup thread, started and its modules loaded before a side is timed, as a running
 * dataplane's is: a start-up cost (about 0.4 s of CPU here) is not a cost per record. Its caches
 * start empty.
 */
async function startedLookups(): Promise<LookupThread> {
  const lookups = lookupThread({ identity: identityOptions })
  await lookups.started()
  return lookups
}

async function ours(
  dids: string[],
  deps: LookupThread,
  start: () => void,
): Promise<Omit<Run, Timed>> {
  const schema = uniqueName('bench_bf_ours')
  schemas.push(schema)
  const db = createPgDb({ url: PG_URL, schema, poolSize: 10 })
  await migrateToLatest(db)
  const writer = new Writer(db.db, deps, {
    // BENCH_TX_THREAD=0: batches written on the writer's own thread, as before the thread.
    transactions: process.env.BENCH_TX_THREAD === '0' ? undefined : db.transactions,
  })
  const prefetch = new IdentityPrefetch(db.db, deps)
  const backfill = new Backfill({
    ...BACKFILL_DEFAULTS,
    db: db.db,
    writer,
    didDocs: deps,
    verify: VERIFY,
    concurrency: CONCURRENCY,
    perHost: CONCURRENCY,
    prefetch,
  })
  await backfill.repos.enqueue(dids)
  // Its threads started before the clock, as a running dataplane's are (the lookup thread too:
  // startedLookups): their modules' loading, about 1.5 s of CPU here, is no cost per record.
  await Promise.all([backfill.started(), db.transactions?.started()])
  start()
  const t = performance.now()
  const timer = setInterval(() => {
    const s = backfill.stats
    const secs = (performance.now() - t) / 1000
    log(
      `  openplane: ${s.done}/${dids.length} repos, ${s.records} records, ${(s.records / secs).toFixed(0)} rec/s`,
    )
  }, 10_000)
  const stats = await backfill.run({ drain: true })
  prefetch.stop()
  clearInterval(timer)
  const seconds = (performance.now() - t) / 1000
  await backfill.close()
  await db.close()
  if (stats.failed) log(`  openplane: ${stats.failed} repos failed`)
  return {
    name: `openplane${VERIFY ? ' (verifying)' : ''}`,
    schema,
    repos: stats.done,
    records: await recordsIn(schema),
    seconds,
    bytes: stats.bytes,
  }
}

/**
 * The machine's floor for these repos: fetching them alone (this process and the server) and
 * storing the rows ours ended with alone (Postgres), CPU per record; two cores over their sum
 * bound the records/s of any backfill of these repos here.
 */
async function printFloor(o: Run): Promise<void> {
  const fetched = await fetchFloor(httpUrl, compared, CONCURRENCY, replay.proc.pid!)
  const stored = await postgresFloor(o.schema, INDEXED_TABLES, () => cpuByName('postgres'))
  const us = (s: number) => (s / Math.max(1, o.records)) * 1e6
  const [client, server, pg] = [us(fetched.clientCpu), us(fetched.serverCpu), us(stored.pgCpu)]
  const bound = 2e6 / (client + server + pg)
  console.log(
    `floor: fetching the ${fetched.repos} repos alone ${(o.records / fetched.seconds).toFixed(0)} ` +
      `rec/s (cpu us/record client ${client.toFixed(0)}, server ${server.toFixed(0)}); storing ` +
      `the ${stored.rows} rows alone postgres ${pg.toFixed(0)} us/record; two cores over their ` +
      `sum: ${bound.toFixed(0)} rec/s, openplane at ${((100 * o.records) / o.seconds / bound).toFixed(0)}% of it`,
  )
}

const schemas: string[] = []
const perRecord = (seconds: number, r: Run) => ((seconds / Math.max(1, r.records)) * 1e6).toFixed(0)
const row = (r: Run) =>
  `| ${r.name} | ${r.repos} | ${r.records} | ${r.seconds.toFixed(1)} | ` +
  `${(r.repos / r.seconds).toFixed(0)} | ${(r.records / r.seconds).toFixed(0)} | ` +
  `${perRecord(r.nodeCpu, r)} | ${perRecord(r.pgCpu, r)} | ${perRecord(r.serverCpu, r)} | ` +
  `${(r.statements / Math.max(1, r.records)).toFixed(2)} |`
let summaryLine: string | undefined
try {
  const runs: Run[] = []
  log(`building the ${compared.length} compared repos' CARs…`)
  await warm(compared)
  log(`${compared.length} repos on each side, ${CONCURRENCY} in flight…`)
  if (SIDES.has('stock')) runs.push(await timed((start) => stock(compared, start)))
  if (SIDES.has('openplane')) {
    const lookups = await startedLookups()
    runs.push(await timed((start) => ours(compared, lookups, start)))
    await lookups.stop()
  }
  console.log('')
  console.log(
    '| side | repos | records | seconds | repos/s | records/s | node CPU us/record | ' +
      'postgres CPU us/record | server CPU us/record | statements/record |',
  )
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
  for (const r of runs) console.log(row(r))
  const [s, o] = runs
  if (s && o && runs.length === 2) {
    const diffs = await tableDiffs(s.schema, o.schema, INDEXED_TABLES, () => ['indexedAt'])
    for (const d of diffs) console.log(formatTableDiff(d, s.schema, o.schema, 3))
    console.log(`\ntable differences ${diffs.length}`)
    summaryLine =
      `backfill: stock ${(s.records / s.seconds).toFixed(0)} rec/s, openplane ` +
      `${(o.records / o.seconds).toFixed(0)} rec/s, ratio ` +
      `${(o.records / o.seconds / (s.records / s.seconds)).toFixed(1)}x; ` +
      `cpu us/record openplane ${perRecord(o.nodeCpu, o)}, postgres ${perRecord(o.pgCpu, o)}`
  }
  const openplane = runs.find((r) => r.name.startsWith('openplane'))
  if (openplane) console.log(`\n${await stageProfile()}`)
  if (openplane && process.env.BENCH_FLOOR !== '0') await printFloor(openplane)
  if (SIDES.has('openplane') && process.env.BENCH_WHOLE !== '0') {
    log(`openplane: every repo (${all.length})…`)
    const lookups = await startedLookups()
    const whole = await timed((start) => ours(all, lookups, start))
    await lookups.stop()
    console.log(`\n${row(whole)}`)
    console.log(
      `CAR bytes fetched: ${whole.bytes} (${(whole.bytes / Math.max(1, whole.records)).toFixed(0)} per record); ` +
        `firehose frames for the same network: ${summary.bytes} bytes over ${summary.frames} events ` +
        `(${(summary.bytes / summary.frames).toFixed(0)} per event)`,
    )
    // The live stream for the same network, by source: what a deployment pays in bandwidth.
    printWire(await measureWire(httpUrl, summary.frames, log), summary.frames)
    console.log(
      `every repo: ${whole.repos} repos, ${whole.records} records, ` +
        `${(whole.records / whole.seconds).toFixed(0)} rec/s`,
    )
  }
  // Last: the side-by-side figures the goals are set on.
  if (summaryLine) console.log(`\n${summaryLine}`)
} finally {
  await replay.stop()
  if (process.env.BENCH_KEEP_SCHEMAS !== '1') await dropSchemas(schemas)
}

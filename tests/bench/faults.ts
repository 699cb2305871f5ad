// pnpm bench:faults — the dataplane (`openplane start`, its own process, production defaults)
// put through the faults an operator meets, on a replayed realistic corpus, each phase in a fresh
// schema and compared with an uninterrupted run over the same stream:
//   1. reference: the small corpus indexed without interruption;
//   2. kills: `kill -9` at random points of ingest (restarted each time at once);
//   3. Postgres outage: a private Postgres stopped for 10 s, then started again, under reads
//      (the AppView's mix) and paced ingest; reads must answer ok or `unavailable`, never
//      `unknown`/`internal`;
//   4. Redis outage: a private Redis killed for 10 s, back empty, later flushed, under the same
//      load; reads fall back to Postgres, so none may fail;
//   5. source drops: the relay cuts every connection, repeatedly, during ingest;
//   6. refetch failures: every commit after a repo's first breaks its chain (the repo is asked
//      for again) and the PDS refuses every refetch (400 RepoNotFound): the live events held
//      for each repo while it was fetched must be written when the fetch fails;
//   7. soak: the dataplane's capacity measured first (events/s: the head start indexed from
//      cold; reads/s: answered per second to FAULTS_PROBE_CALLERS callers each asking again as
//      soon as answered beside the stream paced at half the events/s, times the share of it
//      ingest kept up with meanwhile: reads at their limit take the writer's thread from
//      ingest); that pair is the mix's capacity; then reads and paced ingest at half of it (both
//      halved) for a long while in steady
//      state (an index already built, reads warmed up): RSS at the start of the measured window
//      vs at its end, and every answer in it that is not ok; then twice the capacity (reads and
//      the stream's pace) for FAULTS_OVERLOAD_SECONDS: the answered reads' p99, the reads
//      refused (resource_exhausted) and failed otherwise; then half again until the dataplane
//      has caught up with the whole stream: events lost (the stream's events not applied, or
//      applied with an error) and the reads of the recovery's last 30 s that were not ok.
// Phases 2–6 end with every indexed table diffed against the reference: rows only in the
// reference are lost, rows only in the phase's schema are doubled (a counter off by one shows as
// one of each). Not part of CI; about two hours by default. Ends with one line:
//   faults: kills <n>, lost <n>, doubled <n>; pg outage unknown <n>; redis outage failed reads <n>; refetch failures lost <n>; soak at <n> rps + <n> ev/s rss growth <x>%, errors <n>; at 2x p99 <ms> ms, refused <n>, lost <n>
//
//   FAULTS_EVENTS / FAULTS_REPOS / FAULTS_SEED  the small corpus for phases 1–5 (60000 / 10000 / 1)
//   FAULTS_SOAK_EVENTS / FAULTS_SOAK_REPOS      the soak's corpus (500000 / 100000, seed 1: the
//     one bench:ingest records); FAULTS_SOAK_CORPUS a recorded corpus file instead (a soak at
//     half capacity for 30 minutes needs millions of events)
//   FAULTS_KILLS (20), FAULTS_DROPS (5), FAULTS_OUTAGE_SECONDS (10)
//   FAULTS_READERS     the active users the reads are for (2000, a fixed draw from the corpus's
//     users): the AppView reads again and again for its active users, so their timelines are
//     warm after a first read, as in production
//   FAULTS_READ_RATE   reads/s during the outages (200)
//   FAULTS_INGEST_RATE events/s of the paced stream during the outages (1000)
//   FAULTS_SOAK_SECONDS (1800, the measured window), FAULTS_SOAK_HEAD_START (100000 events indexed
//   before the reads), FAULTS_SOAK_WARMUP_SECONDS (60, reads before the window, not counted);
//   FAULTS_SOAK_READ_RATE / FAULTS_SOAK_INGEST_RATE override the soak's rates (the soak's
//   ingest pace is also bounded by the corpus: of the frames left after the head start, the
//   overload keeps what its window at twice the capacity takes, at most half, and the soak gets
//   the rest); FAULTS_OVERLOAD_READ_RATE the reads/s at twice (to repeat an earlier run's)
//   FAULTS_PROBE_CALLERS (128, under DATAPLANE_MAX_RPCS_IN_FLIGHT), FAULTS_PROBE_SECONDS (20),
//   FAULTS_OVERLOAD_SECONDS (300), FAULTS_RECOVERY_SECONDS (3600: the most the dataplane is
//   given to catch up afterwards, while its lag keeps falling)
//   FAULTS_SOAK_PG  where the soak's index lives: `private` (default), a Postgres of its own
//     set up as an operator would for a dataplane (SOAK_PG_SETTINGS below, with
//     pg_stat_statements: the statements that cost most in each half of the window are
//     printed), or `shared`, the machine's; FAULTS_SOAK_PG_SETTINGS `name=value,…` over those
//   FAULTS_PHASES  comma list of kills,pg,redis,drops,refetch,soak (default all)
//   OPENPLANE_TEST_PG_URL
import { performance } from 'node:perf_hooks'
import pg from 'pg'
import { CorpusReader, didFor, ReplayServer } from '@openplane/sim'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { tableDiffs, INDEXED_TABLES } from '../harness/indexer.ts'
import {
  DATAPLANE_PG_SETTINGS,
  parseSettings,
  startPrivatePostgres,
  type PrivatePostgres,
} from '../harness/private-postgres.ts'
import { appliedSeq, spawnDataplane, waitForSeq, type Child } from '../harness/processes.ts'
import { startRedisServer, type RedisServer } from '../harness/redis-cluster.ts'
import { dropSchemas } from '../harness/stock-network.ts'
import { benchCorpus } from './corpus.ts'
import { cpuByName, processCpu, rss } from './proc.ts'
import { quantile } from './open-loop.ts'
import { formatTally, readCapacity, readLoad, tallyBetween, type Tally } from './read-load.ts'

const env = (name: string, dflt: number) => Number(process.env[name] ?? dflt)
const SMALL = {
  events: env('FAULTS_EVENTS', 60_000),
  repos: env('FAULTS_REPOS', 10_000),
  seed: env('FAULTS_SEED', 1),
}
const LARGE = {
  events: env('FAULTS_SOAK_EVENTS', 500_000),
  repos: env('FAULTS_SOAK_REPOS', 100_000),
  seed: 1,
}
const KILLS = env('FAULTS_KILLS', 20)
const DROPS = env('FAULTS_DROPS', 5)
const OUTAGE_MS = env('FAULTS_OUTAGE_SECONDS', 10) * 1000
const READ_RATE = env('FAULTS_READ_RATE', 200)
const INGEST_RATE = env('FAULTS_INGEST_RATE', 1000)
const SOAK_MS = env('FAULTS_SOAK_SECONDS', 1800) * 1000
const SOAK_READS = env('FAULTS_SOAK_READ_RATE', NaN)
const SOAK_HEAD = env('FAULTS_SOAK_HEAD_START', 100_000)
const SOAK_WARMUP_MS = env('FAULTS_SOAK_WARMUP_SECONDS', 60) * 1000
const SOAK_INGEST = env('FAULTS_SOAK_INGEST_RATE', NaN)
const PROBE_CALLERS = env('FAULTS_PROBE_CALLERS', 128)
const PROBE_MS = env('FAULTS_PROBE_SECONDS', 20) * 1000
const OVERLOAD_MS = env('FAULTS_OVERLOAD_SECONDS', 300) * 1000
const OVERLOAD_READS = env('FAULTS_OVERLOAD_READ_RATE', NaN)
const RECOVERY_MS = env('FAULTS_RECOVERY_SECONDS', 3600) * 1000
const READERS = env('FAULTS_READERS', 2000)
const SOAK_PG = process.env.FAULTS_SOAK_PG ?? 'private'
if (SOAK_PG !== 'private' && SOAK_PG !== 'shared') {
  throw new Error(`FAULTS_SOAK_PG must be private or shared, not ${SOAK_PG}`)
}
/** The soak's own Postgres: the dataplane's settings (operations.md), with its statements' costs. */
const SOAK_PG_SETTINGS: Record<string, string> = {
  ...DATAPLANE_PG_SETTINGS,
  shared_preload_libraries: 'pg_stat_statements',
  ...parseSettings('FAULTS_SOAK_PG_SETTINGS', process.env.FAULTS_SOAK_PG_SETTINGS),
}
const PHASES = new Set(
  (process.env.FAULTS_PHASES ?? 'kills,pg,redis,drops,refetch,soak').split(','),
)

const log = (...a: unknown[]) => console.log('[bench:faults]', ...a)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const t0 = performance.now()
const elapsed = () => `${((performance.now() - t0) / 1000).toFixed(0)} s`

/** Schemas this run made in the shared Postgres, dropped at the end. */
const schemas: string[] = []
const fresh = (name: string) => {
  const s = uniqueName(`faults_${name}`)
  schemas.push(s)
  return s
}

interface Ingest {
  pgUrl?: string
  schema: string
  replay: ReplayServer
  redis?: RedisServer
}

/** `openplane start` on the replay's stream from its start, with the production defaults. */
function spawnOurs(o: Ingest): Promise<Child> {
  return spawnDataplane({
    pgUrl: o.pgUrl ?? PG_URL,
    schema: o.schema,
    plcUrl: o.replay.httpUrl,
    pdsUrl: o.replay.httpUrl,
    extra: {
      DATAPLANE_FIREHOSE_URLS: o.replay.url,
      DATAPLANE_FIREHOSE_CURSOR: '0',
      DATAPLANE_BATCH_WAIT_MS: '20',
      LOG_LEVEL: 'warn',
      ...(o.redis
        ? {
            DATAPLANE_TIMELINES: 'redis',
            DATAPLANE_REDIS_NODES: `${o.redis.host}:${o.redis.port}`,
            DATAPLANE_REDIS_PREFIX: `${o.schema}:`,
          }
        : { DATAPLANE_TIMELINES: 'memory' }),
    },
  })
}

/** A metric's value summed over its series (those whose labels contain `having`), from /metrics text. */
function metricSum(text: string, name: string, having = ''): number {
  let sum = 0
  for (const line of text.split('\n')) {
    if (!line.startsWith(name) || !line.includes(having)) continue
    const rest = line.slice(name.length)
    if (rest[0] !== ' ' && rest[0] !== '{') continue
    sum += Number(line.slice(line.lastIndexOf(' ') + 1))
  }
  return sum
}

/** Rpcs the dataplane refused so far, by reason, and its event loop's recent delay. */
async function shedSoFar(url: string): Promise<string> {
  const text = await (await fetch(`${url}/metrics`)).text()
  const reasons = ['loop_delay', 'in_flight', 'rpcs_in_flight']
    .map((r) => `${r} ${metricSum(text, 'openplane_rpcs_shed_total', `reason="${r}"`)}`)
    .join(', ')
  const delay = metricSum(text, 'openplane_event_loop_delay_seconds') * 1000
  return `shed so far: ${reasons}; loop delay ${delay.toFixed(1)} ms`
}

/** Waits until no live event is held for a repo being fetched (read twice, a second apart). */
async function heldSettled(url: string): Promise<number> {
  const deadline = Date.now() + 120_000
  let before = -1
  for (;;) {
    const held = metricSum(
      await (await fetch(`${url}/metrics`)).text(),
      'openplane_backfill_held_events',
    )
    if ((held === 0 && before === 0) || Date.now() > deadline) return held
    before = held
    await sleep(1000)
  }
}

/** A fixed draw of READERS users out of 1..users, spread over the ids. */
function activeReaders(users: number): string[] {
  const n = Math.min(READERS, users)
  return Array.from({ length: n }, (_, i) => didFor(1 + ((i * 7919) % users)))
}

/** Where the dataplane answered home timelines from, by path and reason (from its /metrics). */
async function timelinePaths(url: string): Promise<string> {
  const text = await (await fetch(`${url}/metrics`)).text()
  return text
    .split('\n')
    .filter((l) => l.startsWith('openplane_timeline_reads_total{'))
    .map((l) => l.replace('openplane_timeline_reads_total', ''))
    .join(' ')
}

/**
 * Waits until the dataplane applied the stream up to `seq`; when it does not, the error says
 * where it stopped and what it logged, so a stalled phase can be told from a slow one.
 */
async function caughtUp(ours: Child, seq: number): Promise<void> {
  try {
    await waitForSeq(ours.url, seq)
  } catch (err) {
    const at = await appliedSeq(ours.url)
    throw new Error(
      `${(err as Error).message}; applied ${at}; the dataplane logged ${logSummary(ours.output())}`,
    )
  }
}

/** The dataplane's warnings and errors, counted by message, each with the first error it named. */
function logSummary(output: string): string {
  const seen = new Map<string, { n: number; err: string }>()
  for (const line of output.split('\n')) {
    if (!line.startsWith('{')) continue
    try {
      const entry = JSON.parse(line) as {
        level?: number
        msg?: string
        component?: string
        err?: string | { message?: string }
      }
      if ((entry.level ?? 0) < 40) continue
      const key = `${entry.component ?? '-'}: ${entry.msg ?? ''}`
      const err = typeof entry.err === 'string' ? entry.err : (entry.err?.message ?? '')
      const s = seen.get(key) ?? { n: 0, err }
      s.n++
      seen.set(key, s)
    } catch {
      // Not a log line.
    }
  }
  return (
    [...seen]
      .map(([k, { n, err }]) => `${n}× ${k}${err ? ` (${err.slice(0, 120)})` : ''}`)
      .join('; ') || 'none'
  )
}

/** CPU share over a window; a sum over processes falls when some exit (a backend closing). */
const pct = (cpuSeconds: number, seconds: number) =>
  cpuSeconds >= 0 ? `${((cpuSeconds / seconds) * 100).toFixed(0)}%` : 'n/a'

/** Every indexed table of `schema` against the reference: rows lost and rows doubled. */
async function compare(
  reference: string,
  schema: string,
): Promise<{ lost: number; doubled: number }> {
  // Handles are resolved beside the stream under a deadline; a loaded machine may leave one
  // unresolved in one run and not the other. Everything the stream carries is compared.
  const diffs = await tableDiffs(reference, schema, INDEXED_TABLES, (table) =>
    table === 'actor' ? ['handle'] : [],
  )
  for (const d of diffs) {
    log(`  ${d.table}: ${d.onlyStock.length} lost, ${d.onlyOurs.length} doubled or changed`)
    for (const r of d.onlyStock.slice(0, 3)) log(`    - ${r.slice(0, 300)}`)
    for (const r of d.onlyOurs.slice(0, 3)) log(`    + ${r.slice(0, 300)}`)
  }
  return {
    lost: diffs.reduce((n, d) => n + d.onlyStock.length, 0),
    doubled: diffs.reduce((n, d) => n + d.onlyOurs.length, 0),
  }
}

/** A phase's ingest against the reference, logged and added to the totals. */
async function countIngest(phase: string, reference: string, schema: string): Promise<void> {
  const { lost, doubled } = await compare(reference, schema)
  log(`${phase}: ingest ${lost} rows lost, ${doubled} doubled (${elapsed()})`)
  totals.lost += lost
  totals.doubled += doubled
}

/** Codes the fault does not explain: anything but ok, unavailable and deadline_exceeded. */
const unexplained = (t: Tally) =>
  [...t]
    .filter(([c]) => !['ok', 'Unavailable', 'DeadlineExceeded'].includes(c))
    .reduce((n, [, v]) => n + v, 0)
const notOk = (t: Tally) => [...t].filter(([c]) => c !== 'ok').reduce((n, [, v]) => n + v, 0)

const totals = {
  kills: 0,
  lost: 0,
  doubled: 0,
  pgUnknown: NaN,
  redisFailed: NaN,
  refetchLost: NaN,
  rssGrowth: NaN,
  soakErrors: NaN,
  soakReads: NaN,
  soakIngest: NaN,
  overloadP99: NaN,
  overloadRefused: NaN,
  overloadLost: NaN,
}

async function main(): Promise<void> {
  const small = await benchCorpus(SMALL, log)
  const corpus = await CorpusReader.open(small.file)
  const last = small.summary.last_seq
  const readers = activeReaders(corpus.header.users)
  log(`corpus ${small.file}: ${small.summary.frames} events over ${corpus.header.users} users`)

  // 1. The reference: one uninterrupted run at full speed.
  const reference = fresh('ref')
  if (['kills', 'pg', 'redis', 'drops', 'refetch'].some((p) => PHASES.has(p))) {
    const replay = await ReplayServer.start({ corpus })
    const start = performance.now()
    const ours = await spawnOurs({ schema: reference, replay })
    await caughtUp(ours, last)
    log(
      `reference: ${small.summary.frames} events in ${((performance.now() - start) / 1000).toFixed(1)} s`,
    )
    await ours.stop()
    await replay.close()
  }

  // 2. kill -9 at random points of ingest.
  if (PHASES.has('kills')) {
    const schema = fresh('kills')
    const replay = await ReplayServer.start({ corpus })
    // Kill points spread over the stream, in order, each a little past a random applied seq.
    const first = small.summary.first_seq
    const points = Array.from(
      { length: KILLS },
      () => first + Math.random() * (last - first) * 0.97,
    ).sort((a, b) => a - b)
    let ours = await spawnOurs({ schema, replay })
    for (const point of points) {
      while ((await appliedSeq(ours.url)) < point) await sleep(10)
      await sleep(Math.random() * 200)
      ours.proc.kill('SIGKILL')
      await ours.stop('SIGKILL')
      totals.kills++
      ours = await spawnOurs({ schema, replay })
    }
    await caughtUp(ours, last)
    await ours.stop()
    await replay.close()
    await countIngest(`kills (${totals.kills} kill -9)`, reference, schema)
  }

  // 3. Postgres stopped under reads and ingest.
  if (PHASES.has('pg')) {
    const pg = await startPrivatePostgres()
    const schema = fresh('pg')
    const replay = await ReplayServer.start({ corpus, rate: INGEST_RATE })
    try {
      const ours = await spawnOurs({ pgUrl: pg.url, schema, replay })
      const load = readLoad(ours.url, readers, READ_RATE)
      await sleep(Math.min(15_000, (small.summary.frames / INGEST_RATE) * 250))
      const before = load.tally()
      await pg.stop('fast')
      await sleep(OUTAGE_MS)
      await pg.start()
      const during = tallyBetween(before, load.tally())
      await caughtUp(ours, last)
      await sleep(2000)
      const all = await load.stop()
      log(`pg outage: during ${formatTally(during)}; whole phase ${formatTally(all)}`)
      log(`pg outage: the dataplane logged ${logSummary(ours.output())}`)
      totals.pgUnknown = unexplained(all)
      if (ours.proc.exitCode !== null)
        throw new Error(`the dataplane exited during the outage:\n${ours.output()}`)
      await ours.stop()
      await pg.copySchemaTo(schema, PG_URL)
      await countIngest('pg outage', reference, schema)
    } finally {
      await replay.close()
      await pg.destroy()
    }
  }

  // 4. Redis killed, back empty, then flushed, under the same load.
  if (PHASES.has('redis')) {
    const redis = await startRedisServer()
    const schema = fresh('redis')
    const replay = await ReplayServer.start({ corpus, rate: INGEST_RATE })
    try {
      const ours = await spawnOurs({ schema, replay, redis })
      const load = readLoad(ours.url, readers, READ_RATE)
      await sleep(10_000)
      await redis.stop('SIGKILL')
      await sleep(OUTAGE_MS)
      await redis.restart()
      await sleep(10_000)
      await redis.cli('FLUSHALL')
      await caughtUp(ours, last)
      await sleep(5000)
      const all = await load.stop()
      totals.redisFailed = notOk(all)
      log(`redis outage: reads ${formatTally(all)}`)
      log(`redis outage: the dataplane logged ${logSummary(ours.output())}`)
      await ours.stop()
      await countIngest('redis outage', reference, schema)
    } finally {
      await replay.close()
      await redis.dispose()
    }
  }

  // 5. The relay drops every connection, again and again.
  if (PHASES.has('drops')) {
    const schema = fresh('drops')
    const replay = await ReplayServer.start({ corpus, rate: INGEST_RATE * 2 })
    const ours = await spawnOurs({ schema, replay })
    const every = (small.summary.frames / (INGEST_RATE * 2) / (DROPS + 1)) * 1000
    let dropped = 0
    for (let i = 0; i < DROPS; i++) {
      await sleep(every)
      dropped += replay.dropConsumers()
    }
    await caughtUp(ours, last)
    await ours.stop()
    await replay.close()
    await countIngest(`drops (${dropped} connections cut in ${DROPS} drops)`, reference, schema)
  }
  // 6. Every chain broken, every refetch refused.
  if (PHASES.has('refetch')) {
    const schema = fresh('refetch')
    const replay = await ReplayServer.start({ corpus, brokenChains: true })
    const ours = await spawnOurs({ schema, replay })
    await caughtUp(ours, last)
    // The cursor is past every event; what is still held is written as each fetch fails.
    const held = await heldSettled(ours.url)
    const metrics = await (await fetch(`${ours.url}/metrics`)).text()
    log(
      `refetch failures: ${metricSum(metrics, 'openplane_backfill_live_events_total', 'outcome="unfetched"')} ` +
        `held events written when their repo's fetch failed; ${held} still held; ` +
        `${metricSum(metrics, 'openplane_repos_out_of_sync')} repos out of sync`,
    )
    await ours.stop()
    await replay.close()
    const { lost, doubled } = await compare(reference, schema)
    log(`refetch failures: ingest ${lost} rows lost, ${doubled} doubled (${elapsed()})`)
    totals.refetchLost = lost
    totals.lost += lost
    totals.doubled += doubled
  }
  await corpus.close()

  // 7. The soak: steady state, not a cold start. The first SOAK_HEAD events are already on the
  // stream and indexed before any read (a dataplane in service has its index): how fast that
  // goes is the ingest capacity. Then the reads warm up (timelines built on first read, pools,
  // JIT), uncounted; a burst measures the read capacity; then the measured window at half of
  // both, with RSS at its start and at its end (medians of a minute each); then twice both; then
  // half again until the whole stream is applied.
  if (PHASES.has('soak')) {
    const big = await CorpusReader.open(
      process.env.FAULTS_SOAK_CORPUS ?? (await benchCorpus(LARGE, log)).file,
    )
    const redis = await startRedisServer()
    const soakPg =
      SOAK_PG === 'private' ? await startPrivatePostgres({ settings: SOAK_PG_SETTINGS }) : undefined
    const schema = soakPg ? uniqueName('faults_soak') : fresh('soak')
    const statements = soakPg ? await statementStats(soakPg) : undefined
    const head = Math.min(SOAK_HEAD, big.frames - 1)
    // Paced from the start; the head start is there at once.
    const replay = await ReplayServer.start({ corpus: big, rate: 1, headStart: head })
    const soakReaders = activeReaders(big.header.users)
    try {
      const ours = await spawnOurs({ schema, replay, redis, pgUrl: soakPg?.url })
      const pid = ours.proc.pid!
      const caughtUp = performance.now()
      while ((await appliedSeq(ours.url)) < big.seqAt(head - 1)) await sleep(250)
      const ingestCapacity = head / ((performance.now() - caughtUp) / 1000)
      // The overload keeps the frames its window at twice the capacity takes (half of
      // those left at most); the soak gets the rest.
      const left = big.frames - head
      const soakFrames = left - Math.min(left / 2, (ingestCapacity * 2 * OVERLOAD_MS) / 1000)
      const ingestHalf = ingestCapacity / 2
      replay.setRate(ingestHalf)
      log(
        `soak: ${head} events indexed before the reads: ingest capacity ${ingestCapacity.toFixed(0)} events/s; the stream paced at ${ingestHalf.toFixed(0)} events/s (${elapsed()})`,
      )
      let load = readLoad(ours.url, soakReaders, Number.isNaN(SOAK_READS) ? 200 : SOAK_READS)
      await sleep(SOAK_WARMUP_MS)
      log(`soak: warm-up ${SOAK_WARMUP_MS / 1000} s: ${formatTally(await load.stop())}`)
      const appliedBefore = await appliedSeq(ours.url)
      const probeStart = performance.now()
      const probe = await readCapacity(ours.url, soakReaders, PROBE_CALLERS, PROBE_MS)
      // Reads at their limit take the writer's thread from ingest, which then falls behind the
      // paced stream: what they reached is theirs only while ingest gives way. Their capacity
      // beside an ingest that keeps up is that share of it.
      const ingested =
        (big.after(await appliedSeq(ours.url)) - big.after(appliedBefore)) /
        ((performance.now() - probeStart) / 1000)
      const keptUp = Math.min(1, ingested / ingestHalf)
      const readCapacityRps = probe.rps * keptUp
      log(
        `soak: ${PROBE_CALLERS} callers asking again as soon as answered, ${PROBE_MS / 1000} s: ${formatTally(probe.tally)}, ${probe.rps.toFixed(0)} reads/s while ingest ran at ${ingested.toFixed(0)} of ${ingestHalf.toFixed(0)} events/s: read capacity ${readCapacityRps.toFixed(0)} reads/s`,
      )
      // The probe found the mix's capacity: reads at their limit beside the stream at half of
      // its own. The soak runs at half of that point, both rates halved: a soak measures leaks,
      // and each event costs more as the index grows through the window (a run of 12-04 paced
      // at half of each capacity alone fell behind within five minutes, its Postgres CPU per
      // event still climbing).
      const readsHalf = Number.isNaN(SOAK_READS) ? Math.round(readCapacityRps / 2) : SOAK_READS
      // The corpus bounds the pace: the warm-up, the probe and the window must not run out of it.
      const soakIngest = Number.isNaN(SOAK_INGEST)
        ? Math.min(ingestHalf / 2, soakFrames / ((SOAK_WARMUP_MS + PROBE_MS + SOAK_MS) / 1000))
        : SOAK_INGEST
      replay.setRate(soakIngest)
      totals.soakReads = readsHalf
      totals.soakIngest = soakIngest
      load = readLoad(ours.url, soakReaders, readsHalf)
      // What the burst left queued settles before the window opens.
      await sleep(15_000)
      const settled = load.tally()
      const samples: { at: number; rss: number }[] = []
      await statements?.reset()
      let halfway = false
      const start = performance.now()
      let window = {
        at: start,
        ours: processCpu(pid),
        pg: cpuByName('postgres'),
        bench: process.cpuUsage(),
      }
      while (performance.now() - start < SOAK_MS) {
        await sleep(5000)
        load.takeLatencies()
        samples.push({ at: performance.now() - start, rss: rss(pid) })
        if (samples.length % 12 === 0) {
          const lag = replay.status().head_seq - (await appliedSeq(ours.url))
          const now = {
            at: performance.now(),
            ours: processCpu(pid),
            pg: cpuByName('postgres'),
            bench: process.cpuUsage(),
          }
          const secs = (now.at - window.at) / 1000
          const benchCpu = process.cpuUsage(window.bench)
          const cpu = `cpu: openplane ${pct(now.ours - window.ours, secs)}, postgres ${pct(now.pg - window.pg, secs)}, load+replay ${pct((benchCpu.user + benchCpu.system) / 1e6, secs)}`
          window = now
          log(
            `soak ${((performance.now() - start) / 1000).toFixed(0)} s: rss ${(samples.at(-1)!.rss / 2 ** 20).toFixed(0)} MB, lag ${lag} seq, ${cpu}; ${formatTally(tallyBetween(settled, load.tally()))}; ${await shedSoFar(ours.url)}`,
          )
        }
        if (statements && !halfway && performance.now() - start >= SOAK_MS / 2) {
          halfway = true
          log(
            `soak: the window's first half, Postgres statements by time:\n${await statements.top()}`,
          )
          await statements.reset()
        }
      }
      const measured = tallyBetween(settled, await load.stop())
      const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
      const first = median(samples.filter((s) => s.at <= 60_000).map((s) => s.rss))
      const end = median(samples.filter((s) => s.at >= SOAK_MS - 60_000).map((s) => s.rss))
      if (statements) {
        log(
          `soak: the window's second half, Postgres statements by time:\n${await statements.top()}`,
        )
      }
      totals.rssGrowth = ((end - first) / first) * 100
      totals.soakErrors = notOk(measured)
      log(
        `soak: ${(SOAK_MS / 1000).toFixed(0)} s at ${readsHalf} reads/s + ${soakIngest.toFixed(0)} events/s; rss ${(first / 2 ** 20).toFixed(0)} → ${(end / 2 ** 20).toFixed(0)} MB; reads ${formatTally(measured)} (${elapsed()})`,
      )

      // Twice the capacity: reads beyond it are refused, not queued; the stream runs ahead.
      replay.setRate(ingestCapacity * 2)
      const readsTwice = Number.isNaN(OVERLOAD_READS)
        ? Math.round(readCapacityRps * 2)
        : OVERLOAD_READS
      load = readLoad(ours.url, soakReaders, readsTwice)
      await sleep(OVERLOAD_MS)
      const overloaded = await load.stop()
      const answered = Float64Array.from(load.takeLatencies()).sort()
      totals.overloadP99 = quantile(answered, 0.99)
      totals.overloadRefused = overloaded.get('ResourceExhausted') ?? 0
      const lagAfter = replay.status().head_seq - (await appliedSeq(ours.url))
      log(
        `soak: ${OVERLOAD_MS / 1000} s at ${readsTwice} reads/s + ${(ingestCapacity * 2).toFixed(0)} events/s: reads ${formatTally(overloaded)}, answered p50 ${quantile(answered, 0.5).toFixed(1)} ms, p99 ${totals.overloadP99.toFixed(1)} ms; lag ${lagAfter} seq (${elapsed()})`,
      )
      const reasons = [...load.takeReasons()].map(([why, n]) => `${n}× ${why}`)
      if (reasons.length) log(`soak: at twice, failed other than refused: ${reasons.join('; ')}`)

      // Half again, until the dataplane has caught up (two seconds of the stream behind at
      // most) and a whole 30 s of reads was answered ok: it recovered by itself.
      replay.setRate(soakIngest)
      load = readLoad(ours.url, soakReaders, readsHalf)
      const recovering = performance.now()
      // The backlog the overload left drains at what ingest has spare beside the half load: the
      // wait lasts as long as it keeps shrinking (a lag that stopped falling for 2 minutes is
      // not recovering), up to FAULTS_RECOVERY_SECONDS.
      let before = load.tally()
      let recovered = false
      let lowest = lagAfter
      let fellAt = performance.now()
      while (
        !recovered &&
        performance.now() - recovering < RECOVERY_MS &&
        performance.now() - fellAt < 120_000
      ) {
        await sleep(30_000)
        const lag = replay.status().head_seq - (await appliedSeq(ours.url))
        const last = tallyBetween(before, load.tally())
        before = load.tally()
        recovered = lag <= 2 * soakIngest && notOk(last) === 0
        if (lag < lowest) {
          lowest = lag
          fellAt = performance.now()
        }
        log(
          `soak: recovering ${((performance.now() - recovering) / 1000).toFixed(0)} s: lag ${lag} seq; last 30 s ${formatTally(last)}`,
        )
      }
      await load.stop()
      // The stream stops; whatever it sent must be applied, without an error. Waited for as long
      // as the dataplane moves on (an unfinished catch-up is slow, not lost); what stays
      // unapplied through 60 s without progress is lost.
      replay.setRate(0)
      const stream = replay.status().head_seq
      const settling = performance.now()
      let progressAt = performance.now()
      let applied = await appliedSeq(ours.url)
      while (applied < stream && performance.now() - progressAt < 60_000) {
        await sleep(1000)
        const now = await appliedSeq(ours.url)
        if (now > applied) progressAt = performance.now()
        applied = now
      }
      log(
        `soak: ${applied} of ${stream} applied ${((performance.now() - settling) / 1000).toFixed(0)} s after the recovery window`,
      )
      const failed = await eventsFailed(ours.url)
      totals.overloadLost = Math.max(0, stream - applied) + failed
      log(
        `soak: ${recovered ? 'recovered' : 'NOT recovered'} in ${((performance.now() - recovering) / 1000).toFixed(0)} s; stream at seq ${stream}, applied ${applied}, events applied with an error ${failed} (${elapsed()})`,
      )
      log(`soak: the dataplane logged ${logSummary(ours.output())}`)
      log(`soak: timelines answered ${await timelinePaths(ours.url)}`)
      await ours.stop()
    } finally {
      await replay.close()
      await redis.dispose()
      await big.close()
      await statements?.close()
      await soakPg?.destroy()
    }
  }
}

/** pg_stat_statements of a private Postgres: reset, and the statements that cost most since. */
async function statementStats(server: PrivatePostgres) {
  const client = new pg.Client({ connectionString: server.url })
  await client.connect()
  await client.query('create extension if not exists pg_stat_statements')
  return {
    async reset(): Promise<void> {
      await client.query('select pg_stat_statements_reset()')
    },
    async top(n = 12): Promise<string> {
      const { rows } = await client.query<{
        calls: string
        total: number
        mean: number
        rows: string
        query: string
      }>(
        `select calls, total_exec_time as total, mean_exec_time as mean, rows, query
         from pg_stat_statements order by total_exec_time desc limit $1`,
        [n],
      )
      return rows
        .map(
          (r) =>
            `  ${(r.total / 1000).toFixed(1).padStart(7)} s ${r.calls.padStart(8)} calls ${r.mean.toFixed(2).padStart(8)} ms/call ${r.rows.padStart(9)} rows  ${r.query.replace(/\s+/g, ' ').slice(0, 160)}`,
        )
        .join('\n')
    },
    async close(): Promise<void> {
      await client.end()
    },
  }
}

/** Events the dataplane counted as failed (openplane_indexer_events_total{outcome="error"}). */
async function eventsFailed(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text()
  return text
    .split('\n')
    .filter((l) => l.startsWith('openplane_indexer_events_total{') && l.includes('outcome="error"'))
    .reduce((n, l) => n + Number(l.split(' ').at(-1)), 0)
}

try {
  await main()
} finally {
  if (!process.env.FAULTS_KEEP_SCHEMAS) await dropSchemas(schemas)
}
const fmt = (n: number, digits = 0) => (Number.isNaN(n) ? 'n/a' : n.toFixed(digits))
console.log(
  `faults: kills ${totals.kills}, lost ${totals.lost}, doubled ${totals.doubled}; ` +
    `pg outage unknown ${fmt(totals.pgUnknown)}; redis outage failed reads ${fmt(totals.redisFailed)}; ` +
    `refetch failures lost ${fmt(totals.refetchLost)}; ` +
    `soak at ${fmt(totals.soakReads)} rps + ${fmt(totals.soakIngest)} ev/s rss growth ${fmt(totals.rssGrowth, 1)}%, ` +
    `errors ${fmt(totals.soakErrors)}; at 2x p99 ${fmt(totals.overloadP99)} ms, ` +
    `refused ${fmt(totals.overloadRefused)}, lost ${fmt(totals.overloadLost)}`,
)
process.exit(0)

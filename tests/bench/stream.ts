// pnpm bench:stream — `/subscribe` serving N consumers while the dataplane indexes a replayed
// corpus at full speed: `openplane start` with two processes (the first indexes and publishes,
// the second serves the stream, as DATAPLANE_PROCESSES=2 runs them), consumers in a process of
// their own counting frames without parsing them, all on this machine's cores. First the same
// corpus is indexed with nothing published and no consumer: the indexer's rate alone. Then, per
// N, a fresh schema, every consumer reading from the log's start. Reported per N: events/s each
// consumer received, MB/s in all, the stream process's CPU (% of a core, and per delivered MB),
// the indexer's events/s against alone; and the bytes per published message with and without
// zstd. Then, per N, the floor: the indexer alone again beside a bare sender
// (stream-floor-sender.ts) that moves the bytes the stream moved, at its MB/s, to N consumers of
// the same kind: what serving that many bytes on these two cores costs the indexer whatever the
// server; the stream's indexer rate is reported against it. Not part of CI.
//
//   STREAM_CONSUMERS  comma-separated N (default 0,1,100,1000; 0: published, no consumer)
//   STREAM_EVENTS     corpus events (default 20000); BENCH_REPOS (5000), BENCH_SEED (1)
//   STREAM_COMPRESS   1: consumers ask for zstd (default 0)
//   STREAM_DRAIN_SECONDS  how long consumers may take after indexing ends (default 180)
//   STREAM_FLOOR      0: skip the floor runs (default 1)
//   OPENPLANE_TEST_PG_URL
import { fork } from 'node:child_process'
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { performance } from 'node:perf_hooks'
import pg from 'pg'
import { createPgDb, migrateToLatest } from '@openplane/db'
import { compressMessage } from '@openplane/jetstream'
import { frame, OPCODE, textFrame } from '@openplane/subscribe'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { appliedSeq, freePort, spawnReady, type Child } from '../harness/processes.ts'
import { dropSchemas } from '../harness/stock-network.ts'
import { benchCorpus } from './corpus.ts'
import { cpuByName, processCpu, processCpuSplit } from './proc.ts'

const COUNTS = (process.env.STREAM_CONSUMERS ?? '0,1,100,1000').split(',').map(Number)
const EVENTS = Number(process.env.STREAM_EVENTS ?? 20_000)
const REPOS = Number(process.env.BENCH_REPOS ?? 5000)
const SEED = Number(process.env.BENCH_SEED ?? 1)
const COMPRESS = process.env.STREAM_COMPRESS === '1'
const DRAIN_SECONDS = Number(process.env.STREAM_DRAIN_SECONDS ?? 180)
const FLOOR = process.env.STREAM_FLOOR !== '0'
const log = (...a: unknown[]) => console.log('[bench:stream]', ...a)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
/** CPU seconds over events, as µs per event. */
const usPerEvent = (seconds: number, events: number) => ((seconds / events) * 1e6).toFixed(0)

const { file, summary } = await benchCorpus({ events: EVENTS, repos: REPOS, seed: SEED }, log)
log(`corpus ${file}: ${summary.frames} events`)
const replayPort = await freePort()
const replay = await spawnReady(
  ['packages/sim/src/cli.ts', 'serve-firehose', file, '--port', String(replayPort)],
  {},
  `http://127.0.0.1:${replayPort}`,
  '/_replay',
)
const replayHttp = `http://127.0.0.1:${replayPort}`
const schemas: string[] = []

/** Whether a port can be listened on now. */
const bindable = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const s = net.createServer()
    s.once('error', () => resolve(false))
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)))
  })

/**
 * Two free ports in a row, below the ephemeral range: the consumers' thousands of connections
 * take ephemeral ports, and a second process's port (the first + 1) must not be among them.
 */
async function freePortPair(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 10_000) * 2
    if ((await bindable(port)) && (await bindable(port + 1))) return port
  }
}

/** The pids of a process's children. */
function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number)
  } catch {
    return []
  }
}

interface Run {
  schema: string
  dataplane: Child
  /** The indexing process and the serving one. */
  pids: [number, number]
  streamUrl: string | undefined
  rpcUrl: string
}

async function startDataplane(publish: boolean): Promise<Run> {
  const schema = uniqueName('bench_stream')
  schemas.push(schema)
  const pre = createPgDb({ url: PG_URL, schema })
  await migrateToLatest(pre)
  await pre.close()
  const port = await freePortPair()
  let streamPort = await freePortPair()
  while (Math.abs(streamPort - port) < 2) streamPort = await freePortPair()
  const dataplane = await spawnReady(
    ['--max-semi-space-size=64', 'packages/cli/src/main.ts', 'start'],
    {
      DB_POSTGRES_URL: PG_URL,
      DB_POSTGRES_SCHEMA: schema,
      DATAPLANE_PORT: String(port),
      DATAPLANE_PROCESSES: '2',
      DATAPLANE_FIREHOSE_URLS: `ws://127.0.0.1:${replayPort}`,
      DATAPLANE_FIREHOSE_CURSOR: '0',
      DATAPLANE_PLC_URL: replayHttp,
      DATAPLANE_TEST_HANDLE_PDS_URL: replayHttp,
      DATAPLANE_ALLOW_PRIVATE_NETWORK: 'true',
      DATAPLANE_GRAPH: 'false',
      DATAPLANE_TIMELINES: 'off',
      DATAPLANE_SEARCH: 'substring',
      DATAPLANE_BACKFILL_CONCURRENCY: '0',
      DATAPLANE_BATCH_SIZE: '2000',
      LOG_LEVEL: 'warn',
      ...(publish && {
        DATAPLANE_SUBSCRIBE_PORT: String(streamPort),
        DATAPLANE_SUBSCRIBE_WINDOW_MINUTES: '600',
        DATAPLANE_SUBSCRIBE_MAX_CONSUMERS: '100000',
      }),
    },
    `http://127.0.0.1:${port + 1}`,
    '/_health',
  )
  const kids = childrenOf(dataplane.proc.pid!)
  if (kids.length !== 2) throw new Error(`expected 2 processes, found ${kids.length}`)
  // Spawned in order: the first is the indexer's.
  kids.sort((a, b) => a - b)
  return {
    schema,
    dataplane,
    pids: [kids[0]!, kids[1]!],
    streamUrl: publish ? `ws://127.0.0.1:${streamPort + 1}` : undefined,
    rpcUrl: `http://127.0.0.1:${port}`,
  }
}

/**
 * Waits until the indexer has applied the corpus; its events/s and CPU from the first applied
 * event seen to the last, over the events applied in between (a dataplane slow to start under
 * load has applied part of the corpus before the first look: those are not counted).
 */
async function indexed(
  run: Run,
): Promise<{ rate: number; seconds: number; events: number; cpu: number; postgres: number }> {
  let first: { t: number; seq: number; cpu: number; postgres: number } | undefined
  // The corpus's seqs run without a gap from first_seq to last_seq, one per event.
  const eventsAfter = (seq: number) => summary.last_seq - seq
  for (;;) {
    const seq = await appliedSeq(run.rpcUrl)
    const t = performance.now()
    if (!first && seq > 0) {
      first = { t, seq, cpu: processCpu(run.pids[0]), postgres: cpuByName('postgres') }
    }
    if (seq >= summary.last_seq) {
      const seconds = (t - first!.t) / 1000
      const events = eventsAfter(first!.seq)
      if (events < EVENTS / 2) {
        log(`  (only ${events} of ${EVENTS} events applied after the first look: a short measure)`)
      }
      return {
        rate: events / seconds,
        seconds,
        events,
        cpu: processCpu(run.pids[0]) - first!.cpu,
        postgres: cpuByName('postgres') - first!.postgres,
      }
    }
    await sleep(50)
  }
}

interface Consumers {
  pid: number
  ready: Promise<void>
  report(): Promise<{
    now: number
    stats: { frames: number; bytes: number; first: number; last: number; closed: boolean }[]
  }>
  stop(): void
}

function consumers(url: string, n: number): Consumers {
  const child = fork(new URL('./stream-consumers.ts', import.meta.url), [url, String(n)], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  let waiting: ((m: never) => void) | undefined
  const ready = new Promise<void>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`consumers exited ${code}`)))
    child.on('message', (m: { type: string }) => {
      if (m.type === 'ready') resolve()
      else waiting?.(m as never)
    })
  })
  return {
    pid: child.pid!,
    ready,
    report: () =>
      new Promise((resolve) => {
        waiting = resolve as never
        child.send({ type: 'report' })
      }),
    stop: () => child.kill(),
  }
}

/**
 * Bytes per published message, as sent and zstd-compressed with the dictionary; and the frames a
 * consumer got (compressed as asked), for the floor's sender.
 */
async function messageBytes(
  schema: string,
): Promise<{ messages: number; json: number; zstd: number; frames: Buffer }> {
  const client = new pg.Client({ connectionString: PG_URL })
  await client.connect()
  try {
    const { rows } = await client.query<{ message: string }>(
      `select message from "${schema}".openplane_published_event order by time_us limit 20000`,
    )
    const count = await client.query<{ n: string }>(
      `select count(*) as n from "${schema}".openplane_published_event`,
    )
    let json = 0
    let zstd = 0
    const frames: Buffer[] = []
    for (const { message } of rows) {
      const bytes = Buffer.from(message)
      const compressed = compressMessage(bytes)
      json += bytes.length
      zstd += compressed.length
      frames.push(COMPRESS ? frame(OPCODE.binary, compressed) : textFrame(message))
    }
    return {
      messages: Number(count.rows[0]!.n),
      json: json / rows.length,
      zstd: zstd / rows.length,
      frames: Buffer.concat(frames),
    }
  } finally {
    await client.end()
  }
}

interface Floor {
  /** MB/s the sender was asked for, and what the consumers got. */
  asked: number
  mbps: number
  rate: number
}

/**
 * The floor for `n` consumers: the indexer alone (nothing published) while a bare sender moves
 * `bytesPerSecond` of the stream's own frames to `n` consumers of the same kind.
 */
async function floorRun(n: number, frames: Buffer, bytesPerSecond: number): Promise<Floor> {
  log(`floor: ${n} consumers fed ${(bytesPerSecond / 1e6).toFixed(1)} MB/s by a bare sender…`)
  const file = path.join(tmpdir(), `openplane-stream-floor-${process.pid}.frames`)
  writeFileSync(file, frames)
  const port = await freePortPair()
  const sender = fork(
    new URL('./stream-floor-sender.ts', import.meta.url),
    [file, String(port), String(Math.round(bytesPerSecond))],
    { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] },
  )
  try {
    await new Promise<void>((resolve, reject) => {
      sender.once('exit', (code) => reject(new Error(`floor sender exited ${code}`)))
      sender.on('message', (m: { type: string }) => m.type === 'ready' && resolve())
    })
    const c = consumers(`ws://127.0.0.1:${port}/`, n)
    try {
      await c.ready
      const run = await startDataplane(false)
      const before = await c.report()
      const cpu0 = [processCpu(sender.pid!), processCpu(c.pid)]
      const got = await indexed(run)
      const after = await c.report()
      const cpu = [processCpu(sender.pid!) - cpu0[0]!, processCpu(c.pid) - cpu0[1]!]
      await run.dataplane.stop()
      const bytes = (r: typeof after) => r.stats.reduce((a, s) => a + s.bytes, 0)
      const seconds = (after.now - before.now) / 1000
      const mbps = (bytes(after) - bytes(before)) / 1e6 / seconds
      const share = (s: number) => `${((s / seconds) * 100).toFixed(0)} % of a core`
      log(
        `  indexer ${got.rate.toFixed(0)} ev/s, ${usPerEvent(got.cpu, got.events)} µs/event, ` +
          `Postgres ${usPerEvent(got.postgres, got.events)} µs/event; consumers got ` +
          `${mbps.toFixed(1)} MB/s; the sender ${share(cpu[0]!)}, the consumers ${share(cpu[1]!)}`,
      )
      return { asked: bytesPerSecond / 1e6, mbps, rate: got.rate }
    } finally {
      c.stop()
    }
  } finally {
    sender.kill()
    rmSync(file, { force: true })
  }
}

try {
  const aloneOnce = async () => {
    log(`alone: ${EVENTS} events indexed, nothing published…`)
    const run = await startDataplane(false)
    const got = await indexed(run)
    await run.dataplane.stop()
    log(
      `  ${got.rate.toFixed(0)} ev/s, indexer ${usPerEvent(got.cpu, got.events)} µs/event, ` +
        `Postgres ${usPerEvent(got.postgres, got.events)} µs/event`,
    )
    return got
  }
  const before = await aloneOnce()

  const results: {
    n: number
    idx: { rate: number; cpu: number }
    complete: number
    minRate: number
    floor?: Floor
    line: (alone: number) => string
  }[] = []
  for (const n of COUNTS) {
    log(`${n} consumers${COMPRESS ? ' (zstd)' : ''}…`)
    const run = await startDataplane(true)
    const query = `/subscribe?cursor=0${COMPRESS ? '&compress=true' : ''}`
    const c = consumers(run.streamUrl! + query, n)
    await c.ready
    const serveCpu0 = processCpuSplit(run.pids[1])
    const consumersCpu0 = processCpuSplit(c.pid)
    const t0 = performance.now()
    const idx = await indexed(run)
    const { messages, json, zstd, frames } = await messageBytes(run.schema)
    // Until every consumer has every message, or the drain limit.
    let report = await c.report()
    const deadline = performance.now() + DRAIN_SECONDS * 1000
    while (
      report.stats.some((s) => s.frames < messages && !s.closed) &&
      performance.now() < deadline
    ) {
      await sleep(250)
      report = await c.report()
    }
    const wall = (performance.now() - t0) / 1000
    const serveSplit = processCpuSplit(run.pids[1])
    const consumersSplit = processCpuSplit(c.pid)
    const serveCpu = serveSplit.user + serveSplit.system - serveCpu0.user - serveCpu0.system
    const serveSystem = serveSplit.system - serveCpu0.system
    const consumersCpu =
      consumersSplit.user + consumersSplit.system - consumersCpu0.user - consumersCpu0.system
    c.stop()
    await run.dataplane.stop()
    const perEvent = (cpu: number) => usPerEvent(cpu, idx.events)
    if (!n) {
      log(
        `  ${messages} messages published, ${json.toFixed(0)} B each as JSON, ` +
          `${zstd.toFixed(0)} B with zstd (${(json / zstd).toFixed(1)}×); indexer ` +
          `${idx.rate.toFixed(0)} ev/s, ${perEvent(idx.cpu)} µs/event, Postgres ${perEvent(idx.postgres)} µs/event`,
      )
      results.push({ n, idx, complete: 0, minRate: Infinity, line: () => '' })
      continue
    }
    const complete = report.stats.filter((s) => s.frames >= messages).length
    const closed = report.stats.filter((s) => s.closed).length
    const rates = report.stats
      .map((s) => (s.last > s.first ? s.frames / ((s.last - s.first) / 1000) : 0))
      .sort((a, b) => a - b)
    const firstAt = Math.min(...report.stats.map((s) => s.first))
    const lastAt = Math.max(...report.stats.map((s) => s.last))
    const bytes = report.stats.reduce((a, s) => a + s.bytes, 0)
    const mbps = bytes / 1e6 / ((lastAt - firstAt) / 1000)
    const eventsEach = rates[Math.floor(rates.length / 2)]!
    const cpuPct = (serveCpu / wall) * 100
    log(
      `  ${messages} messages (${(messages / EVENTS).toFixed(2)} per event), ` +
        `${json.toFixed(0)} B each as JSON, ${zstd.toFixed(0)} B with zstd (${(json / zstd).toFixed(1)}×)`,
    )
    log(
      `  consumers: ${complete}/${n} got every message, ${closed} closed; events/s each ` +
        `min ${rates[0]!.toFixed(0)}, median ${eventsEach.toFixed(0)}; ${mbps.toFixed(1)} MB/s in all`,
    )
    log(
      `  stream process: ${serveCpu.toFixed(1)} CPU s over ${wall.toFixed(1)} s (${cpuPct.toFixed(0)} % ` +
        `of a core), ${((serveCpu / (bytes / 1e6)) * 1000).toFixed(1)} ms per delivered MB; ` +
        `indexer ${idx.rate.toFixed(0)} ev/s, ${perEvent(idx.cpu)} µs/event, Postgres ` +
        `${perEvent(idx.postgres)} µs/event`,
    )
    log(
      `  of the stream process's CPU ${((serveSystem / serveCpu) * 100).toFixed(0)} % in the ` +
        `kernel (sending); the consumers' process: ${consumersCpu.toFixed(1)} CPU s ` +
        `(${((consumersCpu / wall) * 100).toFixed(0)} % of a core), on the same two cores`,
    )
    const floor = FLOOR ? await floorRun(n, frames, mbps * 1e6) : undefined
    results.push({
      n,
      idx,
      complete,
      minRate: rates[0]!,
      floor,
      line: (alone) =>
        `stream: ${n} consumers, ${eventsEach.toFixed(0)} events/s each, ${mbps.toFixed(1)} MB/s total, ` +
        `openplane cpu ${cpuPct.toFixed(0)}% of a core, indexer ev/s ${idx.rate.toFixed(0)} ` +
        `(alone ${alone.toFixed(0)})`,
    })
  }
  const after = await aloneOnce()
  const alone = (before.rate + after.rate) / 2
  const aloneCpu = ((before.cpu / before.events + after.cpu / after.events) / 2) * 1e6
  log(
    `indexer alone: ${before.rate.toFixed(0)} and ${after.rate.toFixed(0)} ev/s (mean ` +
      `${alone.toFixed(0)}), ${aloneCpu.toFixed(0)} µs/event, Postgres ` +
      `${(((before.postgres / before.events + after.postgres / after.events) / 2) * 1e6).toFixed(0)} µs/event`,
  )
  let held = 0
  for (const r of results) {
    if (!r.n) continue
    if (r.complete === r.n && r.minRate >= 1000 && r.idx.rate >= alone * 0.9) held = r.n
  }
  console.log('')
  log(`largest N held (every message, each ≥ 1000 ev/s, indexer within 10 %): ${held || 'none'}`)
  const slower = (rate: number, base: number) => {
    const pct = (1 - rate / base) * 100
    return pct >= 0 ? `${pct.toFixed(0)} % slower` : `${(-pct).toFixed(0)} % faster`
  }
  for (const r of results) {
    if (!r.floor) continue
    const f = r.floor
    log(
      `floor, ${r.n} consumers: a bare sender moving ${f.mbps.toFixed(1)} MB/s (asked ` +
        `${f.asked.toFixed(1)}): indexer ${f.rate.toFixed(0)} ev/s (alone ${alone.toFixed(0)}, ` +
        `${slower(f.rate, alone)}); the stream's run ` +
        `${r.idx.rate.toFixed(0)} ev/s = ${((r.idx.rate / f.rate) * 100).toFixed(0)} % of the floor`,
    )
  }
  for (const r of results) if (r.n) console.log(r.line(alone))
} catch (err) {
  console.error(err)
  process.exitCode = 1
} finally {
  await replay.stop()
  await dropSchemas(schemas)
}

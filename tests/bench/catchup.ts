// pnpm bench:catchup — an indexer that was down comes back behind a live stream: the recorded
// network corpus is replayed at the network's average rate with its head already CATCHUP_BEHIND
// events ahead, and our indexer starts from the beginning. Measured: the time until it is less
// than a second (of the stream's clock) behind the head, while the head keeps moving. Not in CI.
//
//   CATCHUP_BEHIND   events already out when the indexer starts (default 600000: ten minutes)
//   CATCHUP_RATE     events/s the head advances at (default 1000, the network's average)
//   CATCHUP_MINUTES  give up after this long (default 20)
//   BENCH_CORPUS     a recorded corpus (default: generated under .data/corpus, BEHIND plus the
//                    events of CATCHUP_MINUTES at RATE, at most 2M, over BENCH_REPOS repos)
//   BENCH_REPOS (100000), BENCH_SEED (1), BENCH_BATCH (2000)
//   BENCH_TX_THREAD  0: batches written on the writer's thread, not the transaction thread
import { performance } from 'node:perf_hooks'
import { createPgDb, migrateToLatest } from '@openplane/db'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { startIndexerOn } from '../harness/indexer.ts'
import { freePort, spawnReady } from '../harness/processes.ts'
import { dropSchemas } from '../harness/stock-network.ts'
import { benchCorpus } from './corpus.ts'

const BEHIND = Number(process.env.CATCHUP_BEHIND ?? 600_000)
const RATE = Number(process.env.CATCHUP_RATE ?? 1000)
const MINUTES = Number(process.env.CATCHUP_MINUTES ?? 20)
const REPOS = Number(process.env.BENCH_REPOS ?? 100_000)
const SEED = Number(process.env.BENCH_SEED ?? 1)
const BATCH = Number(process.env.BENCH_BATCH ?? 2000)
const log = (...a: unknown[]) => console.log('[bench:catchup]', ...a)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

const { file, summary } = await benchCorpus(
  {
    events: Math.min(2_000_000, BEHIND + Math.ceil(RATE * MINUTES * 60)),
    repos: REPOS,
    seed: SEED,
  },
  log,
)
if (summary.frames <= BEHIND)
  throw new Error(`${file} has ${summary.frames} events, not more than ${BEHIND}`)

const port = await freePort()
const replay = await spawnReady(
  [
    'packages/sim/src/cli.ts',
    'serve-firehose',
    file,
    '--port',
    String(port),
    '--rate',
    String(RATE),
    '--head-start',
    String(BEHIND),
  ],
  {},
  `http://127.0.0.1:${port}`,
  '/_replay',
)
const schema = uniqueName('bench_catchup')
const pre = createPgDb({ url: PG_URL, schema })
await migrateToLatest(pre)
await pre.close()

try {
  log(`${BEHIND} events behind a stream at ${RATE} events/s; indexing from the start…`)
  const t0 = performance.now()
  const ours = await startIndexerOn(
    {
      source: `ws://127.0.0.1:${port}`,
      plcUrl: `http://127.0.0.1:${port}`,
      testPdsUrl: `http://127.0.0.1:${port}`,
    },
    {
      batchSize: BATCH,
      schema,
      headProbeMs: 1000,
      // 0: batches written on the writer's own thread, as before the transaction thread.
      noTransactionThread: process.env.BENCH_TX_THREAD === '0',
    },
  )
  const elapsed = () => (performance.now() - t0) / 1000
  let caughtUp: number | undefined
  let lastReport = 0
  let last = { t: 0, lag: BEHIND }
  let closing = 0
  while (elapsed() < MINUTES * 60) {
    await sleep(500)
    const s = ours.indexer.state()
    if (s.lagEvents === undefined || s.streamLagSeconds === undefined) continue
    if (s.streamLagSeconds < 1) {
      caughtUp = elapsed()
      break
    }
    if (elapsed() - lastReport >= 10) {
      // How fast the gap closes (events/s): positive while catching up.
      closing = (last.lag - s.lagEvents) / (elapsed() - last.t)
      last = { t: elapsed(), lag: s.lagEvents }
      lastReport = elapsed()
      log(
        `  ${elapsed().toFixed(0)} s: ${s.lagEvents} events (${s.streamLagSeconds.toFixed(1)} s) ` +
          `behind, closing at ${closing.toFixed(0)} events/s`,
      )
    }
    if (s.seq !== undefined && s.seq >= summary.last_seq) break
  }
  const s = ours.indexer.state()
  await ours.close({ keepSchema: true })
  console.log('')
  console.log(
    caughtUp !== undefined
      ? `catch-up: ${BEHIND} events behind at ${RATE} ev/s, caught up in ${caughtUp.toFixed(0)} s ` +
          `(lag under 1 s)`
      : `catch-up: ${BEHIND} events behind at ${RATE} ev/s, not caught up after ` +
          `${elapsed().toFixed(0)} s: ${s.lagEvents ?? '?'} events ` +
          `(${s.streamLagSeconds?.toFixed(1) ?? '?'} s) behind, closing at ${closing.toFixed(0)} ev/s`,
  )
} catch (err) {
  console.error(err)
  process.exitCode = 1
} finally {
  await replay.stop()
  await dropSchemas([schema])
}

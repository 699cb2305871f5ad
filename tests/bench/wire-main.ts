// pnpm bench:wire — bytes on the wire per event through the firehose, Jetstream and
// Jetstream+zstd, for the same recorded network (BENCH_EVENTS, BENCH_REPOS, BENCH_SEED as
// bench:ingest; BENCH_CORPUS for another file). Ends with the `wire:` summary line.
import { freePort, spawnReady } from '../harness/processes.ts'
import { benchCorpus } from './corpus.ts'
import { measureWire, printWire } from './wire.ts'

const EVENTS = Number(process.env.BENCH_EVENTS ?? 500_000)
const REPOS = Number(process.env.BENCH_REPOS ?? 100_000)
const SEED = Number(process.env.BENCH_SEED ?? 1)
const log = (...a: unknown[]) => console.log(`[bench:wire]`, ...a)

const { file, summary } = await benchCorpus({ events: EVENTS, repos: REPOS, seed: SEED }, log)
const port = await freePort()
const httpUrl = `http://127.0.0.1:${port}`
const replay = await spawnReady(
  ['packages/sim/src/cli.ts', 'serve-firehose', file, '--port', String(port)],
  {},
  httpUrl,
  '/_replay',
)
try {
  printWire(await measureWire(httpUrl, summary.frames, log), summary.frames)
} finally {
  await replay.stop()
}

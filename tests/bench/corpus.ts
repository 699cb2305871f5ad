// The recorded network corpus the ingest benches replay: the file named by BENCH_CORPUS, or one
// generated from packages/sim/examples/firehose-network.json with the given size, recorded once
// under .data/corpus and reused by later runs of the same generator version.
import { existsSync, mkdirSync, readFileSync, renameSync } from 'node:fs'
import path from 'node:path'
import { performance } from 'node:perf_hooks'
import {
  CorpusReader,
  GENERATOR_VERSION,
  parseFirehoseParams,
  recordFirehose,
  type CorpusSummary,
} from '@openplane/sim'

const root = path.resolve(import.meta.dirname, '../..')

export async function benchCorpus(
  size: { events: number; repos: number; seed: number },
  log: (...a: unknown[]) => void,
): Promise<{ file: string; summary: CorpusSummary }> {
  let file = process.env.BENCH_CORPUS
  if (!file) {
    const dir = path.join(root, '.data/corpus')
    mkdirSync(dir, { recursive: true })
    const name = `network-${size.events}-${size.repos}-s${size.seed}-g${GENERATOR_VERSION}`
    file = path.join(dir, `${name}.firehose`)
    if (!existsSync(file)) {
      const base = JSON.parse(
        readFileSync(path.join(root, 'packages/sim/examples/firehose-network.json'), 'utf8'),
      ) as object
      const params = parseFirehoseParams({ ...base, ...size })
      log(`recording ${size.events} events over ${size.repos} repos to ${file} (once)…`)
      const t0 = performance.now()
      // Recorded under another name first: an interrupted recording is never taken for a corpus.
      await recordFirehose(params, `${file}.part`, {
        onProgress: (done) => log(`  ${done} events`),
        progressEvery: 50_000,
      })
      renameSync(`${file}.part`, file)
      log(`recorded in ${((performance.now() - t0) / 1000).toFixed(0)} s`)
    }
  }
  const corpus = await CorpusReader.open(file)
  const { summary } = corpus
  await corpus.close()
  return { file, summary }
}

// A source that goes on past events we had not read is a gap, said so in the indexer's state
// and metrics and handed on to be repaired: the firehose says it (#info OutdatedCursor, then
// the oldest frame it keeps), Jetstream does not (it starts at the oldest event it keeps, so
// the first event comes long after the cursor). A cursor inside the window is no gap.
import { ReplayServer } from '@openplane/sim'
import type { SourceGap } from '@openplane/ingest'
import { registry } from '@openplane/telemetry'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { recordTestCorpus, type TestCorpus } from '../harness/corpus.ts'
import { startIndexerOn, type IndexerTarget } from '../harness/indexer.ts'

const FRAMES = 1500
const WINDOW = 500

async function gapsCounted(reason: string): Promise<number> {
  const m = await registry.getSingleMetric('openplane_source_gaps_total')?.get()
  return (m?.values ?? [])
    .filter((v) => v.labels.reason === reason)
    .reduce((a, v) => a + v.value, 0)
}

describe('a source that went on past our cursor', () => {
  let recorded: TestCorpus | undefined
  let server: ReplayServer
  let target: IndexerTarget

  beforeAll(async () => {
    recorded = await recordTestCorpus({ name: 'gap', repos: 60, events: FRAMES, seed: 11 })
    server = await ReplayServer.start({ corpus: recorded.corpus, window: WINDOW })
    const last = recorded.corpus.seqAt(recorded.corpus.frames - 1)
    target = {
      source: server.url,
      plcUrl: server.httpUrl,
      testPdsUrl: server.httpUrl,
      headSeq: async () => last,
    }
  }, 120_000)
  afterAll(async () => {
    await server?.close()
    await recorded?.close()
  })

  /** Runs an indexer from `cursor` to the end of the stream; the gaps it reported. */
  async function run(cursor: number, jetstream = false): Promise<SourceGap[]> {
    const gaps: SourceGap[] = []
    const ours = await startIndexerOn(target, {
      jetstreamGapSeconds: 0.5,
      initialCursor: cursor,
      batchSize: 200,
      onGap: (g) => gaps.push(g),
      jetstream: jetstream ? { compress: false } : undefined,
    })
    try {
      if (jetstream) {
        // Jetstream has no seq: wait for its last event's time_us.
        const lastUs = recorded!.corpus.timeAt(recorded!.corpus.frames - 1) * 1000
        await ours.indexer.waitFor(lastUs)
      } else await ours.catchUp()
      expect(ours.indexer.state().gaps).toBe(gaps.length)
    } finally {
      await ours.close()
    }
    return gaps
  }

  it('firehose: a cursor past the window is OutdatedCursor, counted', async () => {
    const before = await gapsCounted('OutdatedCursor')
    const corpus = recorded!.corpus
    const gaps = await run(corpus.seqAt(10))
    expect(gaps.map((g) => g.reason)).toEqual(['OutdatedCursor'])
    expect(gaps[0]!.source).toBe(server.url)
    expect(await gapsCounted('OutdatedCursor')).toBe(before + 1)
  })

  it('firehose: a cursor inside the window is no gap', async () => {
    const corpus = recorded!.corpus
    expect(await run(corpus.seqAt(FRAMES - WINDOW + 50))).toEqual([])
  })

  it('Jetstream: resumed long after the cursor is a gap', async () => {
    const corpus = recorded!.corpus
    // The stream's clock runs at about 1000 events a second: the oldest event kept is about a
    // second after frame 10; the threshold is set below that.
    const gaps = await runJetstream(corpus.timeAt(10) * 1000)
    expect(gaps.map((g) => g.reason)).toEqual(['jetstream-resumed-later'])
  })

  it('Jetstream: a cursor inside the window is no gap', async () => {
    const corpus = recorded!.corpus
    expect(await runJetstream(corpus.timeAt(FRAMES - WINDOW + 50) * 1000)).toEqual([])
  })

  async function runJetstream(cursorUs: number): Promise<SourceGap[]> {
    return run(cursorUs, true)
  }
})

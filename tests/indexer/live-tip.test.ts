// At the live tip a partial batch is flushed after DATAPLANE_BATCH_WAIT_MS; while a batch is
// being written that timer fires again and again. Each such flush must fold into the write under
// way, whose end flushes or schedules what is left: chaining one more flush to the write each
// time kept every request waiting through every later write, and the waiting grew by a few per
// batch for as long as the stream kept the indexer at its tip (15 million promises, 1.5 GB, in
// a 20-minute soak). Here the writer is slowed to 60 ms a batch beside a stream of 300 events/s,
// and the flushes are counted against what the timer alone can ask for. The test waits for a
// number of writes rather than a time, so a loaded machine makes it slower, not wrong.
import { Indexer, type Writer } from '@openplane/ingest'
import { ReplayServer, type CorpusReader } from '@openplane/sim'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { recordTestCorpus, type TestCorpus } from '../harness/corpus.ts'
import { startIndexerOn, type OurIndexer } from '../harness/indexer.ts'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

describe('an indexer at the live tip', () => {
  let recorded: TestCorpus | undefined
  let corpus: CorpusReader
  let server: ReplayServer | undefined
  let ours: OurIndexer | undefined

  beforeAll(async () => {
    recorded = await recordTestCorpus({ name: 'live-tip', repos: 100, events: 3000, seed: 7 })
    corpus = recorded.corpus
  })
  afterAll(async () => {
    vi.restoreAllMocks()
    await ours?.close()
    await server?.close()
    await recorded?.close()
  })

  it('folds the flushes asked during a write into it, however long the stream goes on', async () => {
    const flushes = vi.spyOn(Indexer.prototype as unknown as { flush(): Promise<void> }, 'flush')
    // The bound below counts time from here: flushes made while the indexer starts count too.
    const counting = Date.now()
    server = await ReplayServer.start({ corpus, rate: 300, headStart: 0 })
    ours = await startIndexerOn(
      { source: server.url, plcUrl: server.httpUrl, testPdsUrl: server.httpUrl },
      { batchSize: 200 },
    )
    let writes = 0
    const writer = ours.writer
    const apply = writer.applyBatch.bind(writer)
    writer.applyBatch = (async (...args: Parameters<Writer['applyBatch']>) => {
      writes++
      await sleep(60)
      return apply(...args)
    }) as Writer['applyBatch']
    const started = Date.now()
    while (writes < 30 && Date.now() - started < 45_000) await sleep(100)
    const elapsed = Date.now() - counting
    expect(writes).toBeGreaterThanOrEqual(30)
    // The 5 ms timer asks for at most one flush per wait, and each write's end for one or two
    // more. Chained, each write's flushes were the sum of every write's so far: past 30 writes
    // that is several times this bound, and it grows with the square of the writes.
    const bound = elapsed / 5 + 2 * writes
    expect(flushes.mock.calls.length).toBeLessThan(bound)
  }, 60_000)
})

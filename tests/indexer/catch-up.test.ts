// An indexer started behind a live stream catches up while the stream goes on, and says how far
// behind it is: the source's live head is probed, lag is reported in events and in the stream's
// own seconds. The stream is a recorded corpus replayed at a fixed rate, its head already 1000
// events ahead when the indexer starts from the beginning.
import { ReplayServer, type CorpusReader } from '@openplane/sim'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { recordTestCorpus, type TestCorpus } from '../harness/corpus.ts'
import { startIndexerOn, type OurIndexer } from '../harness/indexer.ts'

describe('catching up with a live stream', () => {
  let recorded: TestCorpus | undefined
  let corpus: CorpusReader
  let server: ReplayServer
  let ours: OurIndexer | undefined

  beforeAll(async () => {
    recorded = await recordTestCorpus({ name: 'catch-up', repos: 200, events: 3000, seed: 5 })
    corpus = recorded.corpus
  })
  afterAll(async () => {
    await ours?.close()
    await server?.close()
    await recorded?.close()
  })

  it('reports its lag in events and stream seconds, and closes it while the stream goes on', async () => {
    server = await ReplayServer.start({ corpus, rate: 100, headStart: 1000 })
    ours = await startIndexerOn(
      { source: server.url, plcUrl: server.httpUrl, testPdsUrl: server.httpUrl },
      { batchSize: 200, headProbeMs: 100 },
    )
    const seen: { lagEvents: number; streamLag: number }[] = []
    const deadline = Date.now() + 60_000
    for (;;) {
      const s = ours.indexer.state()
      if (s.lagEvents !== undefined && s.streamLagSeconds !== undefined) {
        seen.push({ lagEvents: s.lagEvents, streamLag: s.streamLagSeconds })
        if (s.lagEvents <= 20 && s.streamLagSeconds < 1) break
      }
      if (Date.now() > deadline) throw new Error(`never caught up: ${JSON.stringify(seen.at(-1))}`)
      await new Promise((r) => setTimeout(r, 50))
    }
    // Behind at first (the head was 1000 events ahead: a second of the corpus's clock, which
    // runs at 1000 events/s)…
    expect(Math.max(...seen.map((s) => s.lagEvents))).toBeGreaterThan(500)
    expect(Math.max(...seen.map((s) => s.streamLag))).toBeGreaterThan(0.5)
    // …and caught up while the head kept moving.
    const head = server.status()
    expect(head.head).toBeGreaterThan(1000)
    expect(head.head).toBeLessThan(corpus.frames)
  }, 120_000)
})

// The relay cuts the connection again and again while the indexer reads as fast as it can, with
// frames still waiting to be decoded at each cut: the indexer reconnects from the last frame it
// received, so nothing is read twice or skipped, and every table ends equal to an uninterrupted
// run over the same stream.
import { ReplayServer, type CorpusReader } from '@openplane/sim'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { recordTestCorpus, type TestCorpus } from '../harness/corpus.ts'
import { diffSchemas, INDEXED_TABLES, startIndexerOn, type OurIndexer } from '../harness/indexer.ts'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

describe('relay drops', () => {
  let recorded: TestCorpus | undefined
  let corpus: CorpusReader
  const servers: ReplayServer[] = []
  const indexers: OurIndexer[] = []

  beforeAll(async () => {
    recorded = await recordTestCorpus({ name: 'drops', repos: 1000, events: 20_000, seed: 17 })
    corpus = recorded.corpus
  }, 120_000)

  afterAll(async () => {
    for (const i of indexers) await i.close()
    for (const s of servers) await s.close()
    await recorded?.close()
  })

  async function indexOn(server: ReplayServer): Promise<OurIndexer> {
    const last = corpus.seqAt(corpus.frames - 1)
    const ours = await startIndexerOn(
      {
        source: server.url,
        plcUrl: server.httpUrl,
        testPdsUrl: server.httpUrl,
        headSeq: async () => last,
      },
      // The production batch: up to four batches of frames wait to be decoded, more than one
      // reconnect backoff (250 ms) takes to drain, so a cut leaves frames undecoded when the
      // indexer reconnects.
      { batchSize: 2000, decodeWorkers: 1 },
    )
    indexers.push(ours)
    return ours
  }

  it('reconnects from the last frame received, losing and doubling nothing', async () => {
    const whole = await ReplayServer.start({ corpus })
    servers.push(whole)
    const reference = await indexOn(whole)
    await reference.catchUp()

    const cutting = await ReplayServer.start({ corpus })
    servers.push(cutting)
    const ours = await indexOn(cutting)
    const last = corpus.seqAt(corpus.frames - 1)
    const caughtUp = () => (ours.indexer.state().seq ?? 0) >= last
    // Five cuts, each once the reconnected consumer has been sent a fresh run of frames.
    let drops = 0
    let decodingAtCut = 0
    while (drops < 5 && !caughtUp()) {
      const consumer = cutting.status().consumers[0]
      if (!consumer || consumer.sent < 3000) {
        await sleep(5)
        continue
      }
      decodingAtCut = Math.max(decodingAtCut, consumer.cursor - (ours.indexer.state().seq ?? 0))
      drops += cutting.dropConsumers()
    }
    await ours.catchUp()
    // The stream was cut mid-way five times, with frames sent and not yet committed.
    expect(drops).toBe(5)
    expect(decodingAtCut).toBeGreaterThan(0)
    // Handles are resolved beside the stream, each under a deadline: on a busy machine one run
    // may not have a handle yet that the other has. And an actor left without a handle is
    // resolved again an hour of event time later (the stock's rule, actors.ts
    // needsHandleReindex), which moves its indexedAt: the same effect, seen in CI. Everything
    // the stream carries must match.
    const handles = (table: string) => (table === 'actor' ? ['handle', 'indexedAt'] : [])
    expect(await diffSchemas(reference.schema, ours.schema, INDEXED_TABLES, handles)).toEqual([])
  }, 180_000)
})

// The indexer differential as a reusable block: inside a `describe`, start a dev-env network (the
// stock indexer) and our indexer on its PDS firehose, play a scenario, wait for both, and add one
// test per indexed table asserting both hold the same rows.
import { afterAll, beforeAll, expect, it } from 'vitest'
import { diffSchemas, INDEXED_TABLES, startOurIndexer, type OurIndexer } from './indexer.ts'
import { startStockNetwork, type StockNetwork } from './stock-network.ts'

export interface IndexerRun<T> {
  net: StockNetwork
  ours: OurIndexer
  /** What the scenario returned. */
  result: T
}

export function compareIndexers<T>(
  scenario: (net: StockNetwork, ours: OurIndexer) => Promise<T>,
): () => IndexerRun<T> {
  let net: StockNetwork | undefined
  let ours: OurIndexer | undefined
  let run: IndexerRun<T> | undefined
  beforeAll(async () => {
    net = await startStockNetwork()
    ours = await startOurIndexer(net.network)
    const result = await scenario(net, ours)
    await net.network.processAll()
    await ours.catchUp()
    run = { net, ours, result }
  })
  afterAll(async () => {
    await ours?.close()
    await net?.close()
  })
  it.each(INDEXED_TABLES)('%s', async (table) => {
    expect(await diffSchemas(run!.net.schema, run!.ours.schema, [table])).toEqual([])
  })
  return () => run!
}

// The indexer differential: the stock indexer and ours consume the same PDS firehose; every table
// the indexer writes must end up with the same rows (notification ids aside).
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  diffSchemas,
  INDEXED_TABLES,
  startOurIndexer,
  type OurIndexer,
} from '../harness/indexer.ts'
import { playScenario } from '../harness/scenario.ts'
import { startStockNetwork, type StockNetwork } from '../harness/stock-network.ts'

describe('indexer: same rows as the stock indexer', () => {
  let net: StockNetwork
  let ours: OurIndexer

  beforeAll(async () => {
    net = await startStockNetwork()
    ours = await startOurIndexer(net.network)
    await playScenario(net.network, net.sc)
    await net.network.processAll()
    await ours.catchUp()
  })
  afterAll(async () => {
    await ours?.close()
    await net?.close()
  })

  it.each(INDEXED_TABLES)('%s', async (table) => {
    expect(await diffSchemas(net.schema, ours.schema, [table])).toEqual([])
  })
})

// The indexer differential: the stock indexer and ours consume the same PDS firehose; every table
// the indexer writes must end up with the same rows (notification ids aside).
import { describe } from 'vitest'
import { compareIndexers } from '../harness/compare-indexers.ts'
import { playScenario } from '../harness/scenario.ts'

describe('indexer: same rows as the stock indexer', () => {
  compareIndexers((net) => playScenario(net.network, net.sc))
})

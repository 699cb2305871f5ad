// The indexer differential: the stock indexer and ours consume the same PDS firehose; every table
// the indexer writes must end up with the same rows (notification ids aside).
import { describe, expect, it } from 'vitest'
import { compareIndexers } from '../harness/compare-indexers.ts'
import { playScenario } from '../harness/scenario.ts'

describe('indexer: same rows as the stock indexer', () => {
  const run = compareIndexers((net) => playScenario(net.network, net.sc))

  it('removed the deleted account (so the comparison covers account deletion)', async () => {
    const { ours, result } = run()
    const left = await ours.db.db
      .selectFrom('record')
      .where('did', '=', result.deleted)
      .select('uri')
      .execute()
    expect(left).toEqual([])
    const actor = await ours.db.db
      .selectFrom('actor')
      .where('did', '=', result.deleted)
      .selectAll()
      .execute()
    expect(actor).toEqual([])
  })
})

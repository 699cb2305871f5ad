// Backfill differential: the stock indexer follows a dev-env PDS's firehose from seq 0 while the
// scenario plays; then our backfill fetches every repo the PDS lists and indexes it. Every table
// must hold the same rows, except the columns stamped with the time of indexing (the stock
// stamps the firehose event's time, a backfill the time it fetched the repo).
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { registry } from '@openplane/telemetry'
import { startOurBackfill, type OurBackfill } from '../harness/backfill.ts'
import { formatTableDiff, INDEXED_TABLES, tableDiffs } from '../harness/indexer.ts'
import { playScenario, type ScenarioResult } from '../harness/scenario.ts'
import { startStockNetwork, type StockNetwork } from '../harness/stock-network.ts'

async function waitedSoFar(): Promise<number> {
  const m = await registry.getSingleMetric('openplane_backfill_waited_records_total')?.get()
  return (m?.values ?? []).reduce((sum, v) => sum + v.value, 0)
}

/** Columns a backfill stamps with its own time, not the commit's. */
const unequal = (): string[] => ['indexedAt']

/** Rows a backfill cannot match, documented in the README (Backfill, exceptions). */
function expected(table: string, row: string, deleted: string): boolean {
  const r = JSON.parse(row) as Record<string, unknown>
  // The stock keeps a deleted account's actor_sync and feed_item rows; a backfill never meets
  // the account, and does not know that the account it notifies of a like or a follow is gone.
  if (table === 'actor_sync') return r.did === deleted
  if (table === 'feed_item') return r.originatorDid === deleted
  if (table === 'notification') return r.did === deleted
  return false
}

describe('backfill: the same rows as the stock indexer fed the firehose from seq 0', () => {
  let net: StockNetwork
  let ours: OurBackfill
  let result: ScenarioResult
  let waited = 0
  beforeAll(async () => {
    net = await startStockNetwork()
    result = await playScenario(net.network, net.sc)
    // A deactivated repo is not served by its PDS (getRepo answers RepoDeactivated), so nothing
    // can backfill it; the scenario's deactivated account comes back first.
    await net.sc.agent.com.atproto.server.activateAccount(undefined, {
      headers: net.sc.getHeaders(result.dids.carol as `did:${string}:${string}`),
    })
    await net.network.processAll()
    ours = await startOurBackfill({ plcUrl: net.network.plc.url, testPdsUrl: net.network.pds.url })
    const listed = await ours.enqueueListed(net.network.pds.url)
    expect(listed).toBeGreaterThan(3)
    const before = await waitedSoFar()
    await ours.backfill().run({ drain: true })
    waited = (await waitedSoFar()) - before
  })
  afterAll(async () => {
    await ours?.close()
    await net?.close()
  })

  it.each(INDEXED_TABLES)('%s', async (table) => {
    const diffs = await tableDiffs(net.schema, ours.schema, [table], unequal)
    const keep = (r: string) => !expected(table, r, result.deleted)
    const kept = diffs
      .map((d) => ({
        ...d,
        onlyStock: d.onlyStock.filter(keep),
        onlyOurs: d.onlyOurs.filter(keep),
      }))
      .filter((d) => d.onlyStock.length || d.onlyOurs.length)
    expect(kept.map((d) => formatTableDiff(d, net.schema, ours.schema))).toEqual([])
  })

  it('made replies wait for parents in repos written after theirs', () => {
    // Without waiting, such replies are judged invalid and notify no one (the rows above).
    expect(waited).toBeGreaterThan(0)
  })

  it('marked every listed repo done at the rev the PDS serves', async () => {
    const rows = await ours.db.db.selectFrom('openplane_repo').selectAll().execute()
    expect(rows.filter((r) => r.state !== 'done')).toEqual([])
    expect(rows.map((r) => r.did)).not.toContain(result.deleted)
  })
})

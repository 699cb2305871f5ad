// A backfill beside the live stream, as `openplane start` runs them: our indexer follows the PDS
// firehose from its head while the backfill fetches every repo, and meanwhile the accounts keep
// writing (new posts, deletions of old ones, likes, follows). Every write must land exactly once:
// the tables equal the stock indexer's, fed the whole firehose from seq 0.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Backfill, BACKFILL_DEFAULTS, listRepos } from '@openplane/backfill'
import { createIdentity } from '@openplane/identity'
import { registry } from '@openplane/telemetry'
import { seedMany } from '../harness/backfill.ts'
import { diffSchemas, INDEXED_TABLES, startIndexerOn, type OurIndexer } from '../harness/indexer.ts'
import type { Did } from '../harness/seed.ts'
import { startStockNetwork, type StockNetwork } from '../harness/stock-network.ts'

async function heldSoFar(): Promise<number> {
  const m = await registry.getSingleMetric('openplane_backfill_live_events_total')?.get()
  return (m?.values ?? [])
    .filter((v) => v.labels.outcome === 'held')
    .reduce((a, v) => a + v.value, 0)
}

describe('backfill beside the live stream', () => {
  let net: StockNetwork
  let ours: OurIndexer
  let writes = 0
  let held = 0
  beforeAll(async () => {
    net = await startStockNetwork()
    const { network, sc } = net
    const dids = await seedMany(sc, { accounts: 16, posts: 20 })
    await network.processAll()
    const head = await network.pds.ctx.sequencer.curr()
    ours = await startIndexerOn(
      {
        source: network.pds.url.replace(/^http/, 'ws'),
        plcUrl: network.plc.url,
        testPdsUrl: network.pds.url,
        headSeq: () => network.pds.ctx.sequencer.curr(),
      },
      { initialCursor: head ?? 0, batchSize: 10 },
    )
    const identity = createIdentity({
      plcUrl: network.plc.url,
      allowPrivateNetwork: true,
      timeoutMs: 1000,
    })
    const backfill = new Backfill({
      ...BACKFILL_DEFAULTS,
      db: ours.db.db,
      writer: ours.writer,
      didDocs: identity.idResolver.did,
      concurrency: 1,
      opsPerEvent: 5,
      eventsPerWrite: 2,
    })
    const listed: string[] = []
    for await (const r of listRepos(network.pds.url)) listed.push(r.did)
    await backfill.repos.enqueue(listed)
    const heldBefore = await heldSoFar()
    let finished = false
    const running = backfill.run({ drain: true }).finally(() => (finished = true))
    // Writes while repos are fetched and written: each account in turn, until the backfill ends.
    for (let round = 0; !finished || round < 2; round++) {
      for (const [i, did] of dids.entries()) {
        if (finished && round >= 2) break
        const other = dids[(i + round + 2) % dids.length]! as Did
        const post = await sc.post(did as Did, `live ${round} from ${i}`)
        await sc.like(other, post.ref)
        const old = sc.posts[did]![round]
        if (old) await sc.deletePost(did as Did, old.ref.uri)
        writes += 3
      }
    }
    await running
    await network.processAll()
    await ours.catchUp()
    held = (await heldSoFar()) - heldBefore
  }, 300_000)
  afterAll(async () => {
    await ours?.close()
    await net?.close()
  })

  it('wrote while repos were held', () => {
    expect(writes).toBeGreaterThan(0)
    expect(held).toBeGreaterThan(0)
  })

  it.each(INDEXED_TABLES)('%s', async (table) => {
    expect(await diffSchemas(net.schema, ours.schema, [table], () => ['indexedAt'])).toEqual([])
  })
})

// A consumer stopped for longer than its source's replay window: the PDS answers the old cursor
// with #info OutdatedCursor and goes on from the oldest event it keeps, so the writes made
// meanwhile never come. Ours records the gap (with the stream time it began at), lists the
// repos changed since (listRepos revs), fetches them again through the backfill beside the live
// stream, and ends with the tables of the stock indexer, which never stopped.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Backfill, BACKFILL_DEFAULTS, GapRepair } from '@openplane/backfill'
import { createIdentity } from '@openplane/identity'
import type { SourceGap } from '@openplane/ingest'
import { seedMany } from '../harness/backfill.ts'
import {
  diffSchemas,
  INDEXED_TABLES,
  startIndexerOn,
  type IndexerTarget,
  type OurIndexer,
} from '../harness/indexer.ts'
import { createUser, type Did } from '../harness/seed.ts'
import { startStockNetwork, type StockNetwork } from '../harness/stock-network.ts'

/** The PDS keeps this much of its stream for consumers that reconnect. */
const WINDOW_MS = 3000
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

describe('a consumer past the relay window', () => {
  let net: StockNetwork
  let target: IndexerTarget
  let ours: OurIndexer | undefined
  const gaps: SourceGap[] = []
  let listed = 0
  let refetched = 0
  let missingBeforeRepair: boolean | undefined
  let gapPostUri: string

  /** Lists the repos changed since each gap and fetches them beside the live stream. */
  async function repair(o: OurIndexer, found: SourceGap[]): Promise<void> {
    const identity = createIdentity({
      plcUrl: net.network.plc.url,
      allowPrivateNetwork: true,
      timeoutMs: 1000,
    })
    const backfill = new Backfill({
      ...BACKFILL_DEFAULTS,
      db: o.db.db,
      writer: o.writer,
      didDocs: identity.idResolver.did,
      concurrency: 4,
    })
    backfill.followResyncs()
    // One machine's clocks: the accounts that changed before the gap are told apart by their revs.
    const gapRepair = new GapRepair({ db: o.db.db, repos: backfill.repos, clockMarginMs: 200 })
    for (const gap of found) {
      await gapRepair.repair({ host: net.network.pds.url, after: gap.after })
      const last = gapRepair.state().last
      listed += last?.listed ?? 0
      refetched += last?.refetched ?? 0
    }
    await backfill.run({ drain: true })
  }

  beforeAll(async () => {
    net = await startStockNetwork({ pdsReplayWindowMs: WINDOW_MS })
    const { network, sc } = net
    target = {
      source: network.pds.url.replace(/^http/, 'ws'),
      plcUrl: network.plc.url,
      testPdsUrl: network.pds.url,
      headSeq: () => network.pds.ctx.sequencer.curr(),
    }
    // Indexed while it happens; a start already past the window is repaired the same way.
    const early: SourceGap[] = []
    ours = await startIndexerOn(target, { batchSize: 10, onGap: (g) => early.push(g) })
    const dids = await seedMany(sc, { accounts: 8, posts: 4 })
    await network.processAll()
    await ours.catchUp()
    if (early.length) await repair(ours, early)
    await ours.close({ keepSchema: true })
    const schema = ours.schema
    ours = undefined

    // While ours is stopped: half the accounts write, one account is made; the rest are quiet.
    const [a, b, c, d] = dids
    const post = await sc.post(a!, 'written while the consumer was away')
    gapPostUri = post.ref.uriStr
    await sc.like(b!, post.ref)
    await sc.follow(c!, dids[6]!)
    await sc.deletePost(d!, sc.posts[d!]![0]!.ref.uri)
    await sc.updateProfile(b!, { displayName: 'renamed while away' })
    const joined = (await createUser(sc, 'joiner')) as Did
    await sc.post(joined, 'first post, made in the gap')
    await network.processAll()
    // Past the window: the PDS no longer replays any of that. Then one live write.
    await sleep(WINDOW_MS + 1500)
    await sc.post(b!, 'written after the gap')
    await network.processAll()

    ours = await startIndexerOn(target, { schema, batchSize: 10, onGap: (g) => gaps.push(g) })
    await ours.catchUp()
    const found = await ours.db.db
      .selectFrom('post')
      .select('uri')
      .where('uri', '=', gapPostUri)
      .executeTakeFirst()
    missingBeforeRepair = found === undefined
    await repair(ours, gaps)
    await network.processAll()
    await ours.catchUp()
  }, 300_000)
  afterAll(async () => {
    await ours?.close()
    await net?.close()
  })

  it('the source said OutdatedCursor, and the gap begins at the last event read', () => {
    expect(gaps.map((g) => g.reason)).toEqual(['OutdatedCursor'])
    expect(gaps[0]!.after).toBeDefined()
    expect(ours!.indexer.state().gaps).toBe(1)
  })

  it('the writes made in the gap never came live', () => {
    expect(missingBeforeRepair).toBe(true)
  })

  it('refetched the repos that changed, not every repo listed', () => {
    // a, b, c, d and the new account changed; the other four did not.
    expect(refetched).toBeGreaterThanOrEqual(5)
    expect(refetched).toBeLessThan(listed)
  })

  it.each(INDEXED_TABLES)('%s equals the stock indexer that never stopped', async (table) => {
    expect(await diffSchemas(net.schema, ours!.schema, [table], () => ['indexedAt'])).toEqual([])
  })
})

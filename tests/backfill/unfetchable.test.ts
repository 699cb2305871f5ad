// Repos that cannot be fetched never cost a live event. Our indexer follows a dev-env PDS from
// seq 0 beside the stock indexer, while every repo is asked for again (as a broken chain asks)
// and its PDS answers getRepo 404, 429 forever, 500, nothing, or cannot be reached. The accounts
// keep writing meanwhile: each live event held for a repo being fetched must be written as live
// when the fetch fails, so the tables equal the stock's. The repos are listed out of sync; once
// the PDS serves them again each is fetched and reconciled to its CAR (the CAR wins over an
// index that lost a record meanwhile).
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Backfill, BACKFILL_DEFAULTS, RepoTable } from '@openplane/backfill'
import { createIdentity } from '@openplane/identity'
import type { IngestEvent } from '@openplane/ingest'
import { registry } from '@openplane/telemetry'
import { seedMany } from '../harness/backfill.ts'
import {
  diffSchemas,
  INDEXED_TABLES,
  startOurIndexer,
  type OurIndexer,
} from '../harness/indexer.ts'
import { startPdsFaults, type PdsFault, type PdsFaults } from '../harness/pds-faults.ts'
import type { Did } from '../harness/seed.ts'
import { startStockNetwork, type StockNetwork } from '../harness/stock-network.ts'

const FAULTS: PdsFault[] = ['404', '429', '500', 'silence', 'unreachable']
/** The reason each fault leaves on the repo. */
const REASONS: Record<string, RegExp> = {
  '404': /404 RepoNotFound/,
  '429': /429 RateLimitExceeded/,
  '500': /500 InternalServerError/,
  silence: /no answer in time/,
  unreachable: /getRepo failed: fetch failed/,
}

async function metric(name: string, outcome: string): Promise<number> {
  const m = await registry.getSingleMetric(name)?.get()
  return (m?.values ?? [])
    .filter((v) => v.labels.outcome === outcome)
    .reduce((a, v) => a + v.value, 0)
}

async function until(what: string, ok: () => Promise<boolean> | boolean, ms = 60_000) {
  const deadline = Date.now() + ms
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

describe('repos that cannot be fetched', () => {
  let net: StockNetwork
  let ours: OurIndexer
  let faults: PdsFaults
  let backfill: Backfill
  let running: Promise<unknown>
  let dids: Did[]
  let unfetched = 0
  let phase1: string[][] = []
  let states: {
    did: string
    state: string
    reason: string | null
    failedSince: Date | null
    retryAt: Date | null
  }[]
  let outOfSync: { repos: number; oldest: Date | null }

  const settled = () => dids.every((did) => !ours.writer.gate.hasHeld(did))

  beforeAll(async () => {
    net = await startStockNetwork()
    const { network, sc } = net
    dids = await seedMany(sc, { accounts: 10, posts: 4 })
    await network.processAll()
    ours = await startOurIndexer(network, { batchSize: 10 })
    await ours.catchUp()
    faults = await startPdsFaults(network.pds.url)
    for (const [i, did] of dids.entries()) faults.modes.set(did, FAULTS[i % FAULTS.length]!)
    const identity = createIdentity({
      plcUrl: network.plc.url,
      allowPrivateNetwork: true,
      timeoutMs: 1000,
    })
    faults.redirect(identity.idResolver)
    backfill = new Backfill({
      ...BACKFILL_DEFAULTS,
      db: ours.db.db,
      writer: ours.writer,
      didDocs: identity.idResolver.did,
      concurrency: 10,
      maxAttempts: 2,
      connectTimeoutMs: 400,
      idleTimeoutMs: 400,
      maxHoldMs: 1500,
      retry: { baseMs: 300, maxMs: 1000 },
    })
    backfill.followResyncs()
    const before = await metric('openplane_backfill_live_events_total', 'unfetched')
    // Every repo asked for again, as a broken chain or a #sync asks (Backfill.followResyncs).
    await backfill.repos.enqueue(dids, { refetch: true })
    running = backfill.run({ drain: false, pollMs: 100 })
    // The accounts write while their repos are fetched, fail, and are fetched again.
    for (let round = 0; round < 3; round++) {
      for (const [i, did] of dids.entries()) {
        const other = dids[(i + round + 1) % dids.length]!
        const post = await sc.post(did, `live ${round} from ${i}`)
        await sc.like(other, post.ref)
        const old = sc.posts[did]![round]
        if (old) await sc.deletePost(did, old.ref.uri)
      }
    }
    await network.processAll()
    await ours.catchUp()
    await until('held events written', settled)
    unfetched = (await metric('openplane_backfill_live_events_total', 'unfetched')) - before
    phase1 = await Promise.all(INDEXED_TABLES.map((t) => diffSchemas(net.schema, ours.schema, [t])))
    states = await ours.db.db
      .selectFrom('openplane_repo')
      .select(['did', 'state', 'reason', 'failedSince', 'retryAt'])
      .execute()
    outOfSync = await new RepoTable(ours.db.db).outOfSync()

    // The index loses a record of each repo (an event it should not have had); then the PDS
    // serves every repo again.
    const lost: IngestEvent[] = dids.map((did, i) => ({
      type: 'commit',
      seq: i + 1,
      time: new Date().toISOString(),
      did,
      commit: 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm',
      rev: '2222222222222',
      ops: [
        {
          action: 'delete',
          collection: 'app.bsky.feed.post',
          rkey: sc.posts[did]!.at(-1)!.ref.uri.rkey,
        },
      ],
    }))
    await ours.writer.applyBatch('injected', lost)
    for (const did of dids) faults.modes.set(did, 'pass')
    const repos = new RepoTable(ours.db.db)
    await until('every repo fetched', async () => (await repos.counts()).done === dids.length)
    await until('held events written', settled)
  }, 300_000)
  afterAll(async () => {
    backfill?.stop()
    await running
    await faults?.close()
    await ours?.close()
    await net?.close()
  })

  it('held live events of repos being fetched, and wrote them when the fetch failed', () => {
    expect(unfetched).toBeGreaterThan(0)
  })

  it('failed each repo for what its PDS did', () => {
    const reasons = new Map(states.map((s) => [s.did, s.reason]))
    for (const [i, did] of dids.entries()) {
      expect(reasons.get(did)).toMatch(REASONS[FAULTS[i % FAULTS.length]!]!)
    }
  })

  it('lost no live event: every table equals the stock indexer’s', () => {
    expect(phase1.flat()).toEqual([])
  })

  it('listed every repo out of sync, with its next fetch', () => {
    expect(states).toHaveLength(dids.length)
    for (const s of states) {
      expect(s.state).toBe('failed')
      expect(s.failedSince).toBeInstanceOf(Date)
      expect(s.retryAt).toBeInstanceOf(Date)
    }
    expect(outOfSync.repos).toBe(dids.length)
    expect(outOfSync.oldest).toBeInstanceOf(Date)
  })

  it.each(INDEXED_TABLES)('reconciled to the CARs once served: %s', async (table) => {
    expect(await diffSchemas(net.schema, ours.schema, [table], () => ['indexedAt'])).toEqual([])
  })

  it('keeps no repo out of sync and no event held afterwards', async () => {
    expect(await new RepoTable(ours.db.db).outOfSync()).toEqual({ repos: 0, oldest: null })
    const held = await ours.db.db.selectFrom('openplane_held_event').select('did').execute()
    expect(held).toEqual([])
  })
})

// Sync 1.1 through the writer alone: a live commit whose `since` is not the rev indexed for its
// repo (events were missed), or a #sync to another rev, asks the backfill to fetch that repo
// again, once the batch commits; a chain that holds, a repo never indexed, or an event without a
// `since` (Jetstream) asks for nothing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Backfill, BACKFILL_DEFAULTS } from '@openplane/backfill'
import type { Db } from '@openplane/db'
import type { IngestEvent, Writer } from '@openplane/ingest'
import { registry } from '@openplane/telemetry'
import { openScratchWriter, type ScratchWriter } from '../harness/writer.ts'

const A = 'did:plc:chainchainchainchainchain'
const B = 'did:plc:neverneverneverneverneve'
const CID = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
const TIME = '2026-03-01T12:00:00.000Z'
let seq = 0

const commit = (did: string, rev: string, since: string | null | undefined): IngestEvent => ({
  type: 'commit',
  seq: ++seq,
  time: TIME,
  did,
  commit: CID,
  rev,
  ...(since === undefined ? {} : { since }),
  ops: [
    {
      action: 'create',
      collection: 'app.bsky.feed.post',
      rkey: `3post${rev}aaaaaa`,
      cid: CID,
      record: { $type: 'app.bsky.feed.post', text: `at ${rev}`, createdAt: TIME },
    },
  ],
})
const sync = (did: string, rev: string): IngestEvent => ({
  type: 'sync',
  seq: ++seq,
  time: TIME,
  did,
  commit: CID,
  rev,
})

describe('repos out of sync are fetched again', () => {
  let scratch: ScratchWriter
  let db: Db
  let writer: Writer
  let backfill: Backfill
  const pending = async () =>
    (
      await db.db
        .selectFrom('openplane_repo')
        .select('did')
        .where('state', '=', 'pending')
        .execute()
    ).map((r) => r.did)
  /** The repos pending once the refetch the batch asked for is recorded (it runs after commit). */
  async function pendingSoon(expected: number): Promise<string[]> {
    const deadline = Date.now() + 5000
    for (;;) {
      const dids = await pending()
      if (dids.length >= expected || Date.now() > deadline) return dids
      await new Promise((r) => setTimeout(r, 20))
    }
  }
  const outOfSync = async () => {
    const m = await registry.getSingleMetric('openplane_firehose_out_of_sync_total')?.get()
    return (m?.values ?? []).reduce((a, v) => a + v.value, 0)
  }

  beforeAll(async () => {
    scratch = await openScratchWriter('op_resync')
    ;({ db, writer } = scratch)
    backfill = new Backfill({
      ...BACKFILL_DEFAULTS,
      db: db.db,
      writer,
      didDocs: scratch.identity.idResolver.did,
    })
    backfill.followResyncs()
  })
  afterAll(async () => {
    await scratch?.close()
  })

  it('asks for nothing while the chain holds, across batches and within one', async () => {
    const before = await outOfSync()
    await writer.applyBatch('live', [commit(A, '3ka', null), commit(B, '3ka', '3k0')])
    await writer.applyBatch('live', [commit(A, '3kb', '3ka'), commit(A, '3kc', '3kb')])
    await writer.applyBatch('live', [sync(A, '3kc'), commit(A, '3kd', undefined)])
    // Counted when the batch is prepared: none of these events broke a chain.
    expect(await outOfSync()).toBe(before)
    expect(await pending()).toEqual([])
  })

  it('refetches a repo whose since skips a rev', async () => {
    await writer.applyBatch('live', [commit(A, '3kf', '3ke')])
    expect(await pendingSoon(1)).toEqual([A])
    // Its commit was written all the same (the refetch reconciles what was missed).
    const posts = await db.db.selectFrom('post').select('text').where('creator', '=', A).execute()
    expect(posts.map((p) => p.text).sort()).toContain('at 3kf')
  })

  it('refetches a repo a #sync moves to another rev', async () => {
    await db.db.deleteFrom('openplane_repo').execute()
    await writer.applyBatch('live', [sync(A, '3kf'), sync(B, '3kz')])
    expect(await pendingSoon(1)).toEqual([B])
  })
})

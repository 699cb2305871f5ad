// A commit that follows the rev indexed for its repo creates records the index cannot hold, so
// their own rows are planned without reading them (absent-creates.ts). A PDS that says otherwise
// (a create of a record it already holds, its chain intact) makes the insert conflict: the batch
// is planned again reading every row, and ends as the stock ends, the create ignored and the rest
// of the batch, the same commit included, indexed. Nothing is skipped as an error.
import type { CommitOp, IngestEvent } from '@openplane/ingest'
import { registry } from '@openplane/telemetry'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openScratchWriter, type ScratchWriter } from '../harness/writer.ts'

const DID = 'did:plc:chainedcreateschainedcre'
const CID1 = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
const CID2 = 'bafyreib2rxk3rybk3aobmv5cjuql3bm2twh4jo5uxgf5dpexzqg7l5qrpi'
const TIME = '2026-03-01T12:00:00.000Z'
const POST = 'at://did:plc:someoneelsesomeoneelsesom/app.bsky.feed.post/3kpostaaaaaa'

async function errors(): Promise<number> {
  const m = await registry.getSingleMetric('openplane_indexer_events_total')?.get()
  return (m?.values ?? [])
    .filter((v) => v.labels.outcome === 'error')
    .reduce((sum, v) => sum + v.value, 0)
}

const like = (rkey: string, cid: string): CommitOp => ({
  action: 'create',
  collection: 'app.bsky.feed.like',
  rkey,
  cid,
  record: { $type: 'app.bsky.feed.like', subject: { uri: POST, cid: CID1 }, createdAt: TIME },
})
const post = (rkey: string, text: string): CommitOp => ({
  action: 'create',
  collection: 'app.bsky.feed.post',
  rkey,
  cid: CID1,
  record: { $type: 'app.bsky.feed.post', text, createdAt: TIME },
})
const commit = (seq: number, since: string | null, ops: CommitOp[]): IngestEvent => ({
  type: 'commit',
  seq,
  time: TIME,
  did: DID,
  commit: CID1,
  rev: `3krev${seq}aaaaa`,
  since,
  ops,
})

describe('creates in a repo chained to the index', () => {
  let scratch: ScratchWriter

  beforeAll(async () => {
    scratch = await openScratchWriter('op_chained')
  })
  afterAll(async () => {
    await scratch?.close()
  })

  it('end as the stock ends when the PDS creates a record it already holds', async () => {
    const { writer, db } = scratch
    await writer.applyBatch('chained-test', [
      commit(1, null, [like('3klikeaaaaa1', CID1)]),
      commit(2, '3krev1aaaaa', [post('3kpostaaaaa1', 'first')]),
    ])
    const before = await errors()
    // Its chain intact, the PDS "creates" the like it created at seq 1, and more beside it.
    await writer.applyBatch('chained-test', [
      commit(3, '3krev2aaaaa', [like('3klikeaaaaa1', CID2), post('3kpostaaaaa2', 'second')]),
      commit(4, '3krev3aaaaa', [post('3kpostaaaaa3', 'third')]),
    ])

    const likes = await db.db.selectFrom('like').select(['uri', 'cid']).execute()
    expect(likes).toEqual([{ uri: `at://${DID}/app.bsky.feed.like/3klikeaaaaa1`, cid: CID1 }])
    const record = await db.db
      .selectFrom('record')
      .select('cid')
      .where('uri', '=', `at://${DID}/app.bsky.feed.like/3klikeaaaaa1`)
      .executeTakeFirstOrThrow()
    expect(record.cid).toBe(CID1)
    const texts = await db.db.selectFrom('post').select('text').orderBy('text').execute()
    expect(texts.map((p) => p.text)).toEqual(['first', 'second', 'third'])
    const agg = await db.db
      .selectFrom('post_agg')
      .select('likeCount')
      .where('uri', '=', POST)
      .executeTakeFirstOrThrow()
    expect(Number(agg.likeCount)).toBe(1)
    const sync = await db.db.selectFrom('actor_sync').select('repoRev').executeTakeFirstOrThrow()
    expect(sync.repoRev).toBe('3krev4aaaaa')
    expect((await errors()) - before).toBe(0)
  })
})

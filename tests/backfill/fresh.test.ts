// A repo the index holds nothing of is written without reading what cannot be there: its
// backfill marks the records it creates, and the repo's first write, and the writer answers
// those reads itself. The rows must be exactly those the same events write unmarked, and a
// repo is taken for fresh only when the index holds neither a record nor a feed item of it (an
// account deletion leaves its feed items).
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { indexedRecords } from '@openplane/backfill'
import type { CommitOp, IngestEvent } from '@openplane/ingest'
import { registry } from '@openplane/telemetry'
import { formatTableDiff, INDEXED_TABLES, tableDiffs } from '../harness/indexer.ts'
import { openScratchWriter, type ScratchWriter } from '../harness/writer.ts'

const A = 'did:plc:freshfreshfreshfreshfres'
const B = 'did:plc:olderolderolderolderolde'
const C = 'did:plc:leftoverleftoverleftover'
const CID = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
const TIME = '2026-03-01T12:00:00.000Z'
const POST = 'app.bsky.feed.post'
const LIKE = 'app.bsky.feed.like'
const S32 = '234567abcdefghijklmnopqrstuvwxyz'
const tid = (n: number) => `3kaaaaaaaaa${S32[n >> 5]}${S32[n & 31]}`
const uri = (did: string, collection: string, rkey: string) => `at://${did}/${collection}/${rkey}`
const ref = (u: string) => ({ uri: u, cid: CID })
let seq = 0

const commit = (did: string, ops: CommitOp[], marks: { firstWrite?: true } = {}): IngestEvent => ({
  type: 'commit',
  seq: ++seq,
  time: TIME,
  did,
  commit: CID,
  rev: '3kzzzzzzzzz22',
  ops,
  ...marks,
})
const create = (collection: string, rkey: string, record: object): CommitOp => ({
  action: 'create',
  collection,
  rkey,
  cid: CID,
  record: { $type: collection, createdAt: TIME, ...record },
})

const older = uri(B, POST, tid(1))
/** Repo A as its backfill reads it: posts (a reply and a quote of B's), likes (one twice). */
function repoA(): CommitOp[] {
  const root = uri(A, POST, tid(10))
  return [
    create(LIKE, tid(2), { subject: ref(older) }),
    create(LIKE, tid(3), { subject: ref(older) }),
    create(LIKE, tid(4), { subject: ref(root) }),
    create(POST, tid(10), { text: 'root' }),
    create(POST, tid(11), { text: 'reply', reply: { root: ref(older), parent: ref(older) } }),
    create(POST, tid(12), {
      text: 'quote',
      embed: { $type: 'app.bsky.embed.record', record: ref(older) },
    }),
    create('app.bsky.graph.follow', tid(13), { subject: B }),
    create('app.bsky.feed.repost', tid(14), { subject: ref(older) }),
  ]
}

async function reads(): Promise<number> {
  const m = await registry.getSingleMetric('openplane_indexer_statements_total')?.get()
  return m?.values.find((v) => v.labels.purpose === 'read')?.value ?? 0
}

describe('a fresh repo written with what the backfill knows is absent', () => {
  const scratch: Record<'plain' | 'marked', ScratchWriter | undefined> = {
    plain: undefined,
    marked: undefined,
  }
  const readsBy = { plain: 0, marked: 0 }
  beforeAll(async () => {
    for (const side of ['plain', 'marked'] as const) {
      const s = (scratch[side] = await openScratchWriter(`op_fresh_${side}`))
      await s.writer.applyBatch('live', [commit(B, [create(POST, tid(1), { text: 'older' })])])
      const ops = repoA().map((op) => (side === 'marked' ? { ...op, unseen: true as const } : op))
      const before = await reads()
      const events = [
        commit(A, ops.slice(0, 4), side === 'marked' ? { firstWrite: true } : {}),
        commit(A, ops.slice(4)),
      ]
      await s.writer.applyRepos([{ did: A, events }], async () => {})
      readsBy[side] = (await reads()) - before
    }
  })
  afterAll(async () => {
    await scratch.plain?.close()
    await scratch.marked?.close()
  })

  it('writes the same rows as the events unmarked', async () => {
    const diffs = await tableDiffs(scratch.plain!.schema, scratch.marked!.schema, INDEXED_TABLES)
    expect(diffs.map((d) => formatTableDiff(d, 'plain', 'marked'))).toEqual([])
    const likes = await scratch.marked!.db.db.selectFrom('like').select('uri').execute()
    const dups = await scratch.marked!.db.db.selectFrom('duplicate_record').select('uri').execute()
    expect([likes.length, dups.length]).toEqual([2, 1])
  })

  it('reads less', () => {
    expect(readsBy.marked).toBeLessThan(readsBy.plain)
  })

  it('takes a repo for fresh only when the index holds no record and no feed item of it', async () => {
    const { db } = scratch.marked!
    expect((await indexedRecords(db.db, A)).fresh).toBe(false)
    expect((await indexedRecords(db.db, B)).records.get(older)).toBe(CID)
    expect(await indexedRecords(db.db, C)).toEqual({ records: new Map(), fresh: true })
    // What an account deletion leaves behind.
    await db.db
      .insertInto('feed_item')
      .values({
        type: 'post',
        uri: uri(C, POST, tid(20)),
        cid: CID,
        postUri: uri(C, POST, tid(20)),
        originatorDid: C,
        sortAt: TIME,
      })
      .execute()
    expect(await indexedRecords(db.db, C)).toEqual({ records: new Map(), fresh: false })
  })
})

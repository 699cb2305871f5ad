// A batch's steps are planned once: what each step is known to read (its own rows, the key slots
// of what it inserts, the thread it replies in, the rows its delete removes) is loaded in one
// round before planning, so no step misses a read and runs again. Counted, on real Postgres,
// for commits whose own rows the index may hold (nothing known absent).
import { jsonToLex } from '@atproto/lex-json'
import type { CommitOp, IngestEvent } from '@openplane/ingest'
import { registry } from '@openplane/telemetry'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openScratchWriter, type ScratchWriter } from '../harness/writer.ts'

const ALICE = 'did:plc:planoncealiceplanoncealic'
const BOB = 'did:plc:planoncebobplanoncebobpla'
const CID = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
const IMG = 'bafkreibme22gw2h7y2h7tg2fhqotaqjucnbc24deqo72b6mkl2egezxhvy'
const TIME = '2026-03-01T12:00:00.000Z'
const uri = (did: string, collection: string, rkey: string) => `at://${did}/${collection}/${rkey}`
const ROOT = uri(BOB, 'app.bsky.feed.post', '3krootaaaaaa')

async function planned(): Promise<{ steps: number; runs: number }> {
  const m = await registry.getSingleMetric('openplane_indexer_plan_steps_total')?.get()
  const of = (count: string) => m?.values.find((v) => v.labels.count === count)?.value ?? 0
  return { steps: of('steps'), runs: of('runs') }
}

const create = (collection: string, rkey: string, record: object): CommitOp => ({
  action: 'create',
  collection,
  rkey,
  cid: CID,
  // Records as the decoder hands them on: lex values (a blob's ref a CID).
  record: jsonToLex({ $type: collection, createdAt: TIME, ...record }) as object,
})
const remove = (collection: string, rkey: string): CommitOp => ({
  action: 'delete',
  collection,
  rkey,
})
const subject = { uri: ROOT, cid: CID }
const reply = (rkey: string, text: string, parent = ROOT) =>
  create('app.bsky.feed.post', rkey, {
    text,
    reply: { root: subject, parent: { uri: parent, cid: CID } },
    embed: {
      $type: 'app.bsky.embed.images',
      images: [
        { alt: '', image: { $type: 'blob', ref: { $link: IMG }, mimeType: 'image/jpeg', size: 1 } },
      ],
    },
  })
let seq = 0
const commit = (did: string, ops: CommitOp[]): IngestEvent => ({
  type: 'commit',
  seq: ++seq,
  time: TIME,
  did,
  commit: CID,
  rev: `3krev${String(seq).padStart(8, 'a')}`,
  // Unchained: nothing is known absent, every own row is read.
  since: null,
  ops,
})

describe('planning a batch', () => {
  let scratch: ScratchWriter

  beforeAll(async () => {
    scratch = await openScratchWriter('op_planonce')
  })
  afterAll(async () => {
    await scratch?.close()
  })

  it('runs each step once, creates and deletes of every kind alike', async () => {
    const { writer, db } = scratch
    await writer.applyBatch('plan-once', [
      commit(BOB, [create('app.bsky.feed.post', '3krootaaaaaa', { text: 'root' })]),
      commit(ALICE, [
        create('app.bsky.feed.like', '3klikeaaaaa1', { subject }),
        create('app.bsky.feed.repost', '3krepostaaa1', { subject }),
        create('app.bsky.graph.follow', '3kfollowaaa1', { subject: BOB }),
        reply('3kreplyaaaa1', 'first'),
      ]),
    ])
    const before = await planned()
    await writer.applyBatch('plan-once', [
      commit(ALICE, [
        remove('app.bsky.feed.like', '3klikeaaaaa1'),
        remove('app.bsky.feed.repost', '3krepostaaa1'),
        remove('app.bsky.graph.follow', '3kfollowaaa1'),
        remove('app.bsky.feed.post', '3kreplyaaaa1'),
      ]),
      commit(ALICE, [
        create('app.bsky.feed.like', '3klikeaaaaa2', { subject }),
        create('app.bsky.feed.repost', '3krepostaaa2', { subject }),
        create('app.bsky.graph.follow', '3kfollowaaa2', { subject: BOB }),
        reply('3kreplyaaaa2', 'second'),
        reply('3kreplyaaaa3', 'third', uri(ALICE, 'app.bsky.feed.post', '3kreplyaaaa2')),
        create('app.bsky.actor.profile', 'self', { displayName: 'Alice' }),
      ]),
      commit(BOB, [create('app.bsky.feed.like', '3klikeaaaaa3', { subject })]),
    ])
    const after = await planned()
    const steps = after.steps - before.steps
    // 11 ops and 3 commits' last steps.
    expect(steps).toBe(14)
    expect(after.runs - before.runs).toBe(steps)

    const posts = await db.db.selectFrom('post').select('text').orderBy('text').execute()
    expect(posts.map((p) => p.text)).toEqual(['root', 'second', 'third'])
    const images = await db.db.selectFrom('post_embed_image').select('postUri').execute()
    expect(images).toHaveLength(2)
    const agg = await db.db
      .selectFrom('post_agg')
      .select(['likeCount', 'repostCount', 'replyCount'])
      .where('uri', '=', ROOT)
      .executeTakeFirstOrThrow()
    expect(agg).toEqual({ likeCount: 2, repostCount: 1, replyCount: 1 })
  })
})

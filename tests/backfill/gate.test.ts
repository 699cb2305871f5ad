// The order of a repo's backfill and its live events, through the writer alone: while a repo is
// held, a live delete of a record the fetched CAR still has is written after the CAR's records,
// so the record stays deleted; live events the CAR already covers are dropped, after the
// backfill too; a retried live batch holds nothing twice. A repo that cannot be fetched gets its
// held events written as live, in order; held events survive a restart; holding is bounded. A
// reply from another repo to a held repo's post waits with it, so it is judged with its parent.
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Db } from '@openplane/db'
import type { IngestEvent, Writer } from '@openplane/ingest'
import { Writer as WriterClass, writerDeps } from '@openplane/ingest'
import { openScratchWriter, type ScratchWriter } from '../harness/writer.ts'

const DID = 'did:plc:gategategategategategate'
const CID = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
const TIME = '2026-03-01T12:00:00.000Z'
const rkey = (i: number) => `3post${String(i).padStart(8, 'a')}`
const uriOf = (did: string, i: number) => `at://${did}/app.bsky.feed.post/${rkey(i)}`
const uri = (i: number) => uriOf(DID, i)
const record = (i: number) => ({ $type: 'app.bsky.feed.post', text: `post ${i}`, createdAt: TIME })

type Commit = Extract<IngestEvent, { type: 'commit' }>
const commitOf = (did: string, seq: number, rev: string, ops: Commit['ops']): Commit => ({
  type: 'commit',
  seq,
  time: TIME,
  did,
  commit: CID,
  rev,
  ops,
})
const commit = (seq: number, rev: string, ops: Commit['ops']): Commit =>
  commitOf(DID, seq, rev, ops)
const create = (i: number): Commit['ops'][number] => ({
  action: 'create',
  collection: 'app.bsky.feed.post',
  rkey: rkey(i),
  cid: CID,
  record: record(i),
})
const del = (i: number): Commit['ops'][number] => ({
  action: 'delete',
  collection: 'app.bsky.feed.post',
  rkey: rkey(i),
})
/** Post `i` replying to post 1 of `to`. */
const replyOp = (i: number, to: string): Commit['ops'][number] => ({
  action: 'create',
  collection: 'app.bsky.feed.post',
  rkey: rkey(i),
  cid: CID,
  record: {
    ...record(i),
    reply: { root: { uri: uriOf(to, 1), cid: CID }, parent: { uri: uriOf(to, 1), cid: CID } },
  },
})

describe('repo gate: a backfill and the live events of its repo', () => {
  let scratch: ScratchWriter
  let db: Db
  let writer: Writer
  const posts = async (did = DID) =>
    (
      await sql<{ uri: string }>`select uri from post where creator = ${did} order by uri`.execute(
        db.db,
      )
    ).rows.map((r) => r.uri)
  /** The repo's posts with their reply verdicts. */
  const verdicts = (did: string) =>
    sql<{ uri: string; invalidReplyRoot: boolean | null }>`
      select uri, "invalidReplyRoot" from post where creator = ${did} order by uri`.execute(db.db)
  /** The seqs of the repo's held events kept in Postgres. */
  const stored = async (did: string) =>
    (
      await sql<{ seq: string }>`
      select seq from openplane_held_event where did = ${did} order by seq`.execute(db.db)
    ).rows.map((r) => Number(r.seq))

  beforeAll(async () => {
    scratch = await openScratchWriter('op_gate')
    ;({ db, writer } = scratch)
  })
  afterAll(async () => {
    await scratch?.close()
  })

  it('writes held events newer than the fetched rev after it, drops older ones', async () => {
    writer.gate.hold(DID)
    // Live, while the CAR (at rev 3kb) is fetched: post 2 deleted at rev 3kc (newer), post 3
    // created at rev 3ka (older: the CAR has it), post 4 created at 3kd.
    const live = [
      commit(10, '3kc', [del(2)]),
      commit(11, '3ka', [create(3)]),
      commit(12, '3kd', [create(4)]),
    ]
    await writer.applyBatch('live', live)
    // Retried (as after an ambiguous failure): holds nothing twice.
    await writer.applyBatch('live', live)
    expect(writer.gate.newer(DID, '')).toHaveLength(3)
    expect(await posts()).toEqual([])
    // The CAR at 3kb: posts 1, 2, 3.
    await writer.applyRepos(
      [
        {
          did: DID,
          events: [commit(1, '3kb', [create(1), create(2), create(3)])],
          finish: { rev: '3kb' },
        },
      ],
      async () => {},
    )
    expect(await posts()).toEqual([uri(1), uri(3), uri(4)])
    expect(writer.gate.holding(DID)).toBe(false)
    // A relay behind the PDS sends the CAR's commits again: dropped; a newer one is applied.
    await writer.applyBatch('live', [commit(13, '3kb', [create(2)]), commit(14, '3ke', [del(1)])])
    expect(await posts()).toEqual([uri(3), uri(4)])
  })

  it('writes every held event as live, in order, when the repo cannot be fetched', async () => {
    const did = 'did:plc:unfetchableunfetchableun'
    writer.gate.hold(did)
    // Create 1 and 2, delete 1, then create 3: applied out of order, post 1 would come back.
    await writer.applyBatch('live', [
      commitOf(did, 20, '3kb', [create(1), create(2)]),
      commitOf(did, 21, '3kc', [del(1)]),
    ])
    await writer.applyBatch('live', [commitOf(did, 22, '3kd', [create(3)])])
    expect(await posts(did)).toEqual([])
    // Kept with the cursor that moved past them.
    expect(await stored(did)).toEqual([20, 21, 22])
    let marked = 0
    await writer.applyRepos([{ did, events: [], finish: {} }], async () => void marked++)
    expect(marked).toBe(1)
    expect(writer.gate.holding(did)).toBe(false)
    expect(await posts(did)).toEqual([uriOf(did, 2), uriOf(did, 3)])
    expect(await stored(did)).toEqual([])
    // Its later events are live again, with no CAR to cover anything.
    await writer.applyBatch('live', [commitOf(did, 23, '3ka', [del(2)])])
    expect(await posts(did)).toEqual([uriOf(did, 3)])
  })

  it('applies the events a crash left held before anything else, once', async () => {
    const did = 'did:plc:crashedcrashedcrashedcra'
    writer.gate.hold(did)
    await writer.applyBatch('live', [
      commitOf(did, 30, '3kb', [create(1)]),
      commitOf(did, 31, '3kc', [create(2), del(1)]),
    ])
    expect(await stored(did)).toEqual([30, 31])
    // A new process on the same database: nothing in memory, the rows in Postgres.
    const restarted = new WriterClass(db.db, writerDeps(scratch.identity, 200))
    expect(await restarted.recoverHeld()).toBe(2)
    expect(await posts(did)).toEqual([uriOf(did, 2)])
    expect(await stored(did)).toEqual([])
    expect(await restarted.recoverHeld()).toBe(0)
  })

  it("holds another repo's reply to a held repo's post until that repo is written", async () => {
    const parent = 'did:plc:parentparentparentparentp'
    const replier = 'did:plc:replierreplierreplierrepl'
    writer.gate.hold(parent)
    // The parent post (held with its repo), a reply to it from another repo, then that repo's
    // next post: the reply and what follows it wait, in order.
    await writer.applyBatch('live', [
      commitOf(parent, 50, '3kb', [create(1)]),
      commitOf(replier, 51, '3kb', [replyOp(1, parent)]),
      commitOf(replier, 52, '3kc', [create(2)]),
    ])
    expect(await posts(replier)).toEqual([])
    expect(await stored(replier)).toEqual([51, 52])
    // The parent's fetch fails: its events and then the waiting ones are written, in order.
    await writer.applyRepos([{ did: parent, events: [], finish: {} }], async () => {})
    expect(writer.gate.holding(replier)).toBe(false)
    expect(await stored(replier)).toEqual([])
    const judged = await verdicts(replier)
    // Judged with its parent there: not an invalid reply (the stock leaves the flag unset).
    expect(judged.rows).toEqual([
      { uri: uriOf(replier, 1), invalidReplyRoot: null },
      { uri: uriOf(replier, 2), invalidReplyRoot: null },
    ])
    const notified = await sql<{ reason: string }>`
      select reason from notification where "recordUri" = ${uriOf(replier, 1)}`.execute(db.db)
    expect(notified.rows.map((r) => r.reason)).toContain('reply')
    // Live again afterwards.
    await writer.applyBatch('live', [commitOf(replier, 53, '3kd', [del(2)])])
    expect(await posts(replier)).toEqual([uriOf(replier, 1)])
  })

  it('a held repo let go first keeps its replies to another held repo until that one goes', async () => {
    const parent = 'did:plc:heldparentheldparentheldp'
    const replier = 'did:plc:heldreplierheldreplierhe'
    // Both repos are being fetched; the reply's repo fails first.
    writer.gate.hold(parent)
    writer.gate.hold(replier)
    await writer.applyBatch('live', [
      commitOf(parent, 60, '3kb', [create(1)]),
      commitOf(replier, 61, '3kb', [replyOp(1, parent)]),
    ])
    await writer.applyRepos([{ did: replier, events: [], finish: {} }], async () => {})
    expect(await posts(replier)).toEqual([])
    expect(writer.gate.holding(replier)).toBe(true)
    // Then the parent's: both written, the reply after its parent.
    await writer.applyRepos([{ did: parent, events: [], finish: {} }], async () => {})
    expect(writer.gate.holding(replier)).toBe(false)
    const judged = await sql<{ invalidReplyRoot: boolean | null }>`
      select "invalidReplyRoot" from post where uri = ${uriOf(replier, 1)}`.execute(db.db)
    expect(judged.rows).toEqual([{ invalidReplyRoot: null }])
    expect(await stored(replier)).toEqual([])
  })

  it('a repo waiting for one held repo keeps its replies to another until that one goes', async () => {
    const first = 'did:plc:firstheldfirstheldfirsthe'
    const second = 'did:plc:secondheldsecondheldsecon'
    const replier = 'did:plc:waiterwaiterwaiterwaiterw'
    writer.gate.hold(first)
    writer.gate.hold(second)
    // The replier waits for the first repo (its reply to it), then replies to the second.
    await writer.applyBatch('live', [
      commitOf(first, 70, '3kb', [create(1)]),
      commitOf(second, 71, '3kb', [create(1)]),
      commitOf(replier, 72, '3kb', [replyOp(1, first)]),
      commitOf(replier, 73, '3kc', [replyOp(2, second)]),
    ])
    // The first repo's fetch fails while the second is still held: the replier's events stay
    // held, now waiting for the second.
    await writer.applyRepos([{ did: first, events: [], finish: {} }], async () => {})
    expect(await posts(replier)).toEqual([])
    expect(writer.gate.holding(replier)).toBe(true)
    await writer.applyRepos([{ did: second, events: [], finish: {} }], async () => {})
    expect(writer.gate.holding(replier)).toBe(false)
    expect(writer.gate.holding(first)).toBe(false)
    const judged = await verdicts(replier)
    expect(judged.rows).toEqual([
      { uri: uriOf(replier, 1), invalidReplyRoot: null },
      { uri: uriOf(replier, 2), invalidReplyRoot: null },
    ])
    expect(await posts(first)).toEqual([uriOf(first, 1)])
    expect(await stored(replier)).toEqual([])
  })

  it('reports a repo whose held events pass a bound, once', async () => {
    const bounded = new WriterClass(db.db, writerDeps(scratch.identity, 200), {
      hold: { perRepo: 2, total: 3 },
    })
    const over: string[] = []
    bounded.gate.onOverflow((did) => over.push(did))
    const a = 'did:plc:boundboundboundboundaaaa'
    const b = 'did:plc:boundboundboundboundbbbb'
    bounded.gate.hold(a)
    bounded.gate.hold(b)
    await bounded.applyBatch('bounded', [
      commitOf(a, 40, '3ka', [create(1)]),
      commitOf(a, 41, '3kb', [create(2)]),
      commitOf(b, 42, '3ka', [create(1)]),
    ])
    expect(over).toEqual([])
    // A third for `a`: past its own bound; then `b` adds to more than three in all.
    await bounded.applyBatch('bounded', [
      commitOf(a, 43, '3kc', [create(3)]),
      commitOf(a, 44, '3kd', [create(4)]),
      commitOf(b, 45, '3kb', [create(2)]),
    ])
    expect(over).toEqual([a, b])
    for (const did of [a, b])
      await bounded.applyRepos([{ did, events: [], finish: {} }], async () => {})
    expect(await posts(a)).toHaveLength(4)
    expect(await posts(b)).toHaveLength(2)
  })
})

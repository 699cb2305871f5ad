// The order of a repo's backfill and its live events, through the writer alone: while a repo is
// held, a live delete of a record the fetched CAR still has is written after the CAR's records,
// so the record stays deleted; live events the CAR already covers are dropped, after the
// backfill too; a retried live batch holds nothing twice.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Db } from '@openplane/db'
import type { IngestEvent, Writer } from '@openplane/ingest'
import { openScratchWriter, type ScratchWriter } from '../harness/writer.ts'

const DID = 'did:plc:gategategategategategate'
const CID = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
const TIME = '2026-03-01T12:00:00.000Z'
const rkey = (i: number) => `3post${String(i).padStart(8, 'a')}`
const uri = (i: number) => `at://${DID}/app.bsky.feed.post/${rkey(i)}`
const record = (i: number) => ({ $type: 'app.bsky.feed.post', text: `post ${i}`, createdAt: TIME })

type Commit = Extract<IngestEvent, { type: 'commit' }>
const commit = (seq: number, rev: string, ops: Commit['ops']): Commit => ({
  type: 'commit',
  seq,
  time: TIME,
  did: DID,
  commit: CID,
  rev,
  ops,
})
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

describe('repo gate: a backfill and the live events of its repo', () => {
  let scratch: ScratchWriter
  let db: Db
  let writer: Writer
  const posts = async () =>
    (await db.db.selectFrom('post').select('uri').orderBy('uri').execute()).map((r) => r.uri)

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
})

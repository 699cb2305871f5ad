// A batch Postgres refuses although its plan was sound (here: a check constraint the plan knows
// nothing of) is redone with halving ranges behind savepoints: the one event at fault is skipped
// and counted, every other event of the batch lands, and the cursor moves past all of them.
import { createPgDb, migrateToLatest, type Db } from '@openplane/db'
import { createIdentity } from '@openplane/identity'
import { Writer, writerDeps, type IngestEvent } from '@openplane/ingest'
import { registry } from '@openplane/telemetry'
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { freePort } from '../harness/processes.ts'
import { dropSchemas } from '../harness/stock-network.ts'

const DID = 'did:plc:refusedbatchrefusedbatch'
const CID = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
const REFUSED = 'refused by the database'
const TIME = '2026-03-01T12:00:00.000Z'

async function errors(): Promise<number> {
  const m = await registry.getSingleMetric('openplane_indexer_events_total')?.get()
  return (m?.values ?? [])
    .filter((v) => v.labels.outcome === 'error')
    .reduce((sum, v) => sum + v.value, 0)
}

const postUri = (i: number) => `at://${DID}/app.bsky.feed.post/3post${String(i).padStart(8, 'a')}`

function commit(seq: number, collection: string, rkey: string, record: object): IngestEvent {
  return {
    type: 'commit',
    seq,
    time: TIME,
    did: DID,
    commit: CID,
    rev: `rev${seq}`,
    ops: [{ action: 'create', collection, rkey, cid: CID, record }],
  }
}

describe('a batch the database refuses', () => {
  let db: Db
  const schema = uniqueName('op_refused')

  beforeAll(async () => {
    db = createPgDb({ url: PG_URL, schema })
    await migrateToLatest(db)
    await sql`alter table post add constraint refuse_one check (text <> ${sql.lit(REFUSED)})`.execute(
      db.db,
    )
  })
  afterAll(async () => {
    await db?.close()
    await dropSchemas([schema])
  })

  it('skips only the event at fault, counts it, and lands the rest', async () => {
    // Nothing listens on this PLC port: the made-up DID stays unresolved, as the stock leaves it.
    const identity = createIdentity({
      plcUrl: `http://127.0.0.1:${await freePort()}`,
      allowPrivateNetwork: true,
      timeoutMs: 200,
    })
    const writer = new Writer(db.db, writerDeps(identity, 200))
    const batch: IngestEvent[] = []
    for (let i = 0; i < 24; i++) {
      const text = i === 13 ? REFUSED : `post ${i}`
      const rkey = postUri(i).split('/').pop()!
      batch.push(
        commit(i + 1, 'app.bsky.feed.post', rkey, {
          $type: 'app.bsky.feed.post',
          text,
          createdAt: TIME,
        }),
      )
    }
    // A like of the refused post and of a good one: both land (a like needs no post).
    batch.push(
      commit(25, 'app.bsky.feed.like', '3likeaaaaaa1', {
        $type: 'app.bsky.feed.like',
        subject: { uri: postUri(13), cid: CID },
        createdAt: TIME,
      }),
      commit(26, 'app.bsky.feed.like', '3likeaaaaaa2', {
        $type: 'app.bsky.feed.like',
        subject: { uri: postUri(3), cid: CID },
        createdAt: TIME,
      }),
    )
    const before = await errors()
    await writer.applyBatch('refused-test', batch)

    const posts = await db.db.selectFrom('post').select('text').execute()
    expect(posts).toHaveLength(23)
    expect(posts.map((p) => p.text)).not.toContain(REFUSED)
    // The skipped event left nothing behind: no record row either.
    const records = await db.db.selectFrom('record').select('uri').execute()
    expect(records.map((r) => r.uri)).not.toContain(postUri(13))
    expect(records).toHaveLength(25)
    const aggs = await db.db
      .selectFrom('post_agg')
      .select(['uri', 'likeCount'])
      .where('likeCount', '>', 0)
      .orderBy('uri')
      .execute()
    expect(aggs.map((a) => [a.uri, Number(a.likeCount)])).toEqual([
      [postUri(13), 1],
      [postUri(3), 1],
    ])
    const profile = await db.db
      .selectFrom('profile_agg')
      .select('postsCount')
      .where('did', '=', DID)
      .executeTakeFirst()
    expect(Number(profile?.postsCount)).toBe(23)
    const cursor = await db.db.selectFrom('openplane_cursor').select('seq').executeTakeFirst()
    expect(Number(cursor?.seq)).toBe(26)
    expect((await errors()) - before).toBe(1)
  })
})

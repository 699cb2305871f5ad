// Adoption in place: the stock indexer fills a schema; `openplane migrate` adopts it without
// re-indexing; `openplane start` then keeps indexing into it from the live firehose, moving the
// stock-computed counters by exact deltas.
import { execFileSync } from 'node:child_process'
import path from 'node:path'
import { createPgDb, type Db } from '@openplane/db'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PG_URL } from '../harness/env.ts'
import { spawnDataplane, waitForSeq, type Child } from '../harness/processes.ts'
import { createUser, seedBasic } from '../harness/seed.ts'
import { startStockNetwork, type StockNetwork } from '../harness/stock-network.ts'

const TABLES = [
  'record',
  'actor',
  'post',
  'like',
  'follow',
  'repost',
  'notification',
  'profile_agg',
  'post_agg',
]
const root = path.resolve(import.meta.dirname, '../..')

describe('adopting a stock-filled database', () => {
  let net: StockNetwork
  let db: Db
  let dataplane: Child | undefined
  let dids: Awaited<ReturnType<typeof seedBasic>>
  const counts = async () =>
    Object.fromEntries(
      await Promise.all(
        TABLES.map(async (t) => {
          const r = await db.db
            .selectFrom(t as 'record')
            .select((eb) => eb.fn.countAll<string>().as('n'))
            .executeTakeFirst()
          return [t, Number(r?.n)] as const
        }),
      ),
    )

  beforeAll(async () => {
    net = await startStockNetwork()
    dids = await seedBasic(net.sc)
    await net.network.processAll()
    // From here on only our indexer writes this schema.
    await net.network.bsky.sub.destroy()
    db = createPgDb({ url: PG_URL, schema: net.schema })
  })
  afterAll(async () => {
    await dataplane?.stop()
    await db?.close()
    await net?.close()
  })

  it('adopts without touching the data, then indexes on top of it', async () => {
    const before = await counts()
    expect(before.post).toBeGreaterThan(5)
    execFileSync(process.execPath, ['packages/cli/src/main.ts', 'migrate'], {
      cwd: root,
      env: {
        ...process.env,
        DB_POSTGRES_URL: PG_URL,
        DB_POSTGRES_SCHEMA: net.schema,
        LOG_LEVEL: 'warn',
      },
    })
    expect(await counts()).toEqual(before)
    const migrations = await db.db
      .selectFrom('openplane_migration' as 'record')
      .selectAll()
      .execute()
    expect(migrations.length).toBeGreaterThanOrEqual(2)

    const aliceAgg = await db.db
      .selectFrom('profile_agg')
      .selectAll()
      .where('did', '=', dids.alice)
      .executeTakeFirstOrThrow()
    const postUri = net.sc.posts[dids.alice]![0]!.ref.uriStr
    const postAgg = await db.db
      .selectFrom('post_agg')
      .selectAll()
      .where('uri', '=', postUri)
      .executeTakeFirst()

    // Start at the live tip: everything before is already in the adopted schema.
    const head = (await net.network.pds.ctx.sequencer.curr()) ?? 0
    dataplane = await spawnDataplane({
      pgUrl: PG_URL,
      schema: net.schema,
      plcUrl: net.network.plc.url,
      pdsUrl: net.network.pds.url,
      extra: { DATAPLANE_FIREHOSE_CURSOR: String(head) },
    })
    const eve = await createUser(net.sc, 'eve')
    await net.sc.follow(eve, dids.alice)
    await net.sc.like(eve, net.sc.posts[dids.alice]![0]!.ref)
    await net.sc.post(eve, 'new here')
    await waitForSeq(dataplane.url, (await net.network.pds.ctx.sequencer.curr()) ?? 0)

    const after = await counts()
    expect(after.post).toBe(before.post! + 1)
    expect(after.like).toBe(before.like! + 1)
    expect(after.follow).toBe(before.follow! + 1)
    const aliceAfter = await db.db
      .selectFrom('profile_agg')
      .selectAll()
      .where('did', '=', dids.alice)
      .executeTakeFirstOrThrow()
    expect(aliceAfter.followersCount).toBe(aliceAgg.followersCount + 1)
    expect(aliceAfter.postsCount).toBe(aliceAgg.postsCount)
    const postAfter = await db.db
      .selectFrom('post_agg')
      .selectAll()
      .where('uri', '=', postUri)
      .executeTakeFirstOrThrow()
    expect(postAfter.likeCount).toBe((postAgg?.likeCount ?? 0) + 1)
    const eveActor = await db.db
      .selectFrom('actor')
      .selectAll()
      .where('did', '=', eve)
      .executeTakeFirstOrThrow()
    expect(eveActor.handle).toBe('eve.test')
  })
})

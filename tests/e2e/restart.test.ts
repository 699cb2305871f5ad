// kill -9 mid-stream, restart: the final state must equal an uninterrupted run — no lost or doubled
// rows, notifications or counts — because the cursor commits with the data it covers.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PG_URL, uniqueName } from '../harness/env.ts'
import {
  diffSchemas,
  INDEXED_TABLES,
  startOurIndexer,
  type OurIndexer,
} from '../harness/indexer.ts'
import { appliedSeq, spawnDataplane, waitForSeq, type Child } from '../harness/processes.ts'
import { seedBasic, type Did } from '../harness/seed.ts'
import { dropSchemas, startStockNetwork, type StockNetwork } from '../harness/stock-network.ts'

describe('restart after kill -9', () => {
  let net: StockNetwork
  let reference: OurIndexer
  let first: Child | undefined
  let second: Child | undefined
  const schema = uniqueName('op_restart')
  let target = 0
  let killedAt = -1

  beforeAll(async () => {
    net = await startStockNetwork()
    const d = await seedBasic(net.sc)
    const users: Did[] = Object.values(d)
    // A stream long enough to be interrupted: posts, likes, reposts, follows churn.
    for (let i = 0; i < 40; i++) {
      const by = users[i % users.length]!
      const post = await net.sc.post(by, `post ${i}`)
      for (const u of users) if (u !== by) await net.sc.like(u, post.ref)
      if (i % 3 === 0) await net.sc.repost(users[(i + 1) % users.length]!, post.ref)
      if (i % 5 === 0)
        await net.sc.reply(users[(i + 2) % users.length]!, post.ref, post.ref, `re ${i}`)
    }
    target = (await net.network.pds.ctx.sequencer.curr()) ?? 0
  })

  afterAll(async () => {
    await first?.stop('SIGKILL')
    await second?.stop()
    await reference?.close()
    await net?.close()
    await dropSchemas([schema])
  })

  it('ends equal to an uninterrupted run', async () => {
    const env = {
      pgUrl: PG_URL,
      schema,
      plcUrl: net.network.plc.url,
      pdsUrl: net.network.pds.url,
      extra: {
        DATAPLANE_FIREHOSE_CURSOR: '0',
        DATAPLANE_BATCH_SIZE: '3',
        DATAPLANE_BATCH_WAIT_MS: '1',
      },
    }
    first = await spawnDataplane(env)
    // Kill once some, but not all, of the stream is applied.
    for (;;) {
      const seq = await appliedSeq(first.url)
      if (seq >= target / 4) break
      await new Promise((r) => setTimeout(r, 5))
    }
    first.proc.kill('SIGKILL')
    await first.stop('SIGKILL')
    killedAt = await (async () => {
      const { createPgDb } = await import('@openplane/db')
      const db = createPgDb({ url: PG_URL, schema })
      const row = await db.db.selectFrom('openplane_cursor').select('seq').executeTakeFirst()
      await db.close()
      return Number(row?.seq ?? -1)
    })()
    expect(killedAt).toBeGreaterThan(0)
    expect(killedAt).toBeLessThan(target)

    second = await spawnDataplane(env)
    await waitForSeq(second.url, target)

    reference = await startOurIndexer(net.network)
    await reference.catchUp()
    expect(await diffSchemas(schema, reference.schema, INDEXED_TABLES)).toEqual([])
  })
})

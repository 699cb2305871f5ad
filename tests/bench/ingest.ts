// pnpm bench:ingest — records/s fully indexed from the same recorded firehose by the stock indexer
// (@atproto/bsky RepoSubscription) and by ours, one after the other on the same machine, each
// into its own fresh schema of the same Postgres. Not part of CI.
//   BENCH_USERS (default 30), BENCH_RECORDS (default 3000), OPENPLANE_TEST_PG_URL
import { writeFileSync } from 'node:fs'
import { performance } from 'node:perf_hooks'
import { IdResolver } from '@atproto/identity'
import { Database, RepoSubscription } from '@atproto/bsky'
import { mockResolvers } from '@atproto/dev-env'
import { createPgDb, migrateToLatest } from '@openplane/db'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { startFakeRelay } from '../harness/fake-relay.ts'
import { diffSchemas, INDEXED_TABLES, startIndexerOn } from '../harness/indexer.ts'
import { createUser, type Did } from '../harness/seed.ts'
import { dropSchemas, startStockNetwork } from '../harness/stock-network.ts'
import { recordFirehose } from './record-firehose.ts'

const USERS = Number(process.env.BENCH_USERS ?? 30)
const RECORDS = Number(process.env.BENCH_RECORDS ?? 3000)
const log = (...a: unknown[]) => console.log(`[bench:ingest]`, ...a)

const net = await startStockNetwork()
const { network, sc } = net
try {
  log(`generating ${USERS} users and ${RECORDS} records through the PDS…`)
  const users: Did[] = []
  for (let i = 0; i < USERS; i++) users.push(await createUser(sc, `user${i}`))
  const posts: Awaited<ReturnType<typeof sc.post>>[] = []
  let made = 0
  const t0 = performance.now()
  while (made < RECORDS) {
    const by = users[made % USERS]!
    const kind = made % 10
    if (kind < 3 || posts.length < 5) posts.push(await sc.post(by, `post ${made}`))
    else if (kind < 7)
      await sc.like(by, posts[(made * 7) % posts.length]!.ref).catch(() => undefined)
    else if (kind < 8) await sc.repost(by, posts[(made * 3) % posts.length]!.ref)
    else if (kind < 9) await sc.follow(by, users[(made * 13) % USERS]!).catch(() => undefined)
    else {
      const p = posts[(made * 5) % posts.length]!
      await sc.reply(by, p.ref, p.ref, `reply ${made}`)
    }
    made++
  }
  log(`generated in ${((performance.now() - t0) / 1000).toFixed(1)} s`)
  const head = (await network.pds.ctx.sequencer.curr()) ?? 0
  const frames = await recordFirehose(network.pds.url, head)
  if (process.env.BENCH_SAVE_CORPUS) {
    // The recorded stream, reusable with tests/harness/fake-relay.ts (JSON lines, base64 frames).
    const lines = frames.map((f) =>
      JSON.stringify({ seq: f.seq, note: '', frame: Buffer.from(f.bytes).toString('base64') }),
    )
    writeFileSync(process.env.BENCH_SAVE_CORPUS, lines.join('\n') + '\n')
  }
  const relay = await startFakeRelay(frames)
  const ops = frames.length
  log(`recorded ${frames.length} frames (seq 1…${head}); replaying each side from a fake relay`)

  // The stock indexer, as dev-env and the stock dataplane run it.
  const stockSchema = uniqueName('bench_stock')
  const stockDb = new Database({ url: PG_URL, schema: stockSchema, poolSize: 10 })
  await stockDb.migrateToLatestOrThrow()
  const idResolver = new IdResolver({ plcUrl: network.plc.url, fetch: globalThis.fetch })
  mockResolvers(idResolver, network.pds)
  const stockSub = new RepoSubscription({ service: relay.url, db: stockDb, idResolver })
  let start = performance.now()
  await stockSub.start()
  while ((stockSub.getCursor() ?? 0) < head) await new Promise((r) => setTimeout(r, 20))
  await stockSub.processAll()
  const stockSecs = (performance.now() - start) / 1000
  await stockSub.destroy()

  // Ours, in-process, same relay, same Postgres; the schema is migrated before timing starts,
  // as the stock's is.
  const oursSchema = uniqueName('bench_ours')
  const pre = createPgDb({ url: PG_URL, schema: oursSchema })
  await migrateToLatest(pre)
  await pre.close()
  start = performance.now()
  const ours = await startIndexerOn(
    {
      source: relay.url,
      plcUrl: network.plc.url,
      testPdsUrl: network.pds.url,
      headSeq: async () => head,
    },
    { batchSize: 500, schema: oursSchema },
  )
  await ours.catchUp()
  const oursSecs = (performance.now() - start) / 1000

  const diffs = await diffSchemas(stockSchema, ours.schema, INDEXED_TABLES)
  const [stockRate, oursRate] = [ops / stockSecs, ops / oursSecs]
  console.log('')
  console.log(`| indexer | events | seconds | events/s |`)
  console.log(`| --- | ---: | ---: | ---: |`)
  console.log(
    `| stock (@atproto/bsky RepoSubscription) | ${ops} | ${stockSecs.toFixed(2)} | ${stockRate.toFixed(0)} |`,
  )
  console.log(`| openplane | ${ops} | ${oursSecs.toFixed(2)} | ${oursRate.toFixed(0)} |`)
  console.log(`\nratio ours/stock: ${(oursRate / stockRate).toFixed(1)}x`)
  console.log(
    diffs.length
      ? `WARNING: tables differ:\n${diffs.join('\n')}`
      : 'both sides wrote identical rows',
  )
  await ours.close()
  await relay.close()
  await stockDb.close()
  await dropSchemas([stockSchema])
} catch (err) {
  console.error(err)
  process.exitCode = 1
} finally {
  await net.close()
}

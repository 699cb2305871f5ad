// pnpm bench:fanout — fan-out latency end to end: a post by the most-followed user of the toolkit's
// power-law userbase (followed by everyone: ~100k followers at 100k users), emitted as a signed
// commit on the toolkit's local firehose, indexed by our dataplane, fanned out through Redis, until
// it is the newest item of every active follower's timeline. The celebrity threshold is turned off
// so the author is fanned out to, and the lossy rule too, so every follower must receive it. Uses
// the schema bench:timeline loads (it loads it when missing). Not part of CI.
//
//   BENCH_USERBASE, BENCH_SCHEMA   as bench:timeline
//   BENCH_ACTIVE    active followers (default 10000: the active users, then others)
//   BENCH_POSTS     posts measured (default 5)
import path from 'node:path'
import { performance } from 'node:perf_hooks'
import { BasicHostList, createDataPlaneClient } from '@atproto/bsky'
import { didFor, LocalNetwork, readUserbaseParams } from '@openplane/sim'
import { Redis } from 'ioredis'
import { PG_URL } from '../harness/env.ts'
import { freePort, spawnReady } from '../harness/processes.ts'
import { startRedisServer } from '../harness/redis-cluster.ts'
import { benchSchema } from './timeline.ts'

const root = path.resolve(import.meta.dirname, '../..')
const USERBASE = process.env.BENCH_USERBASE ?? 'packages/sim/examples/userbase-100k-with-posts.json'
const ACTIVE = Number(process.env.BENCH_ACTIVE ?? 10_000)
const POSTS = Number(process.env.BENCH_POSTS ?? 5)
const PREFIX = 'bench:tl:'

const log = (...a: unknown[]) => console.log('[bench:fanout]', ...a)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

const params = await readUserbaseParams(path.resolve(root, USERBASE))
const schema = process.env.BENCH_SCHEMA ?? benchSchema(params.num_users)
const redis = await startRedisServer()
const net = await LocalNetwork.start({
  seed: params.seed,
  users: params.num_users,
  handleDomain: params.handle_domain,
})
const port = await freePort()
const ours = await spawnReady(
  ['packages/cli/src/main.ts', 'start'],
  {
    DB_POSTGRES_URL: PG_URL,
    DB_POSTGRES_SCHEMA: schema,
    DATAPLANE_PORT: String(port),
    DATAPLANE_FIREHOSE_URLS: net.url,
    DATAPLANE_FIREHOSE_CURSOR: '0',
    DATAPLANE_PLC_URL: net.plcUrl,
    DATAPLANE_ALLOW_PRIVATE_NETWORK: 'true',
    DATAPLANE_TIMELINES: 'redis',
    DATAPLANE_REDIS_NODES: `${redis.host}:${redis.port}`,
    DATAPLANE_REDIS_PREFIX: PREFIX,
    DATAPLANE_CELEBRITY_FOLLOWERS: 'off',
    DATAPLANE_LOSSY_FOLLOW_LIMIT: 'off',
    LOG_LEVEL: 'warn',
  },
  `http://127.0.0.1:${port}`,
  '/_health',
)
const client = createDataPlaneClient(new BasicHostList([ours.url]), { httpVersion: '2' })
const r = new Redis({ host: redis.host, port: redis.port })
try {
  // Active followers of user 1: the active users first, then others in a fixed order.
  const ids: number[] = []
  for (let id = 2; ids.length < ACTIVE && id <= params.num_users; id++) {
    if (id <= params.max_active_user_id || id % 7 === 0) ids.push(id)
  }
  const readers = ids.map(didFor)
  const keys = readers.map((d) => `${PREFIX}t:{${d}}`)
  // A first read of each, 50 at a time, starts its rebuild.
  const readAll = async (dids: readonly string[]) => {
    for (let i = 0; i < dids.length; i += 50) {
      await Promise.all(
        dids.slice(i, i + 50).map((d) => client.getTimeline({ actorDid: d, limit: 1, cursor: '' })),
      )
    }
  }
  const t0 = performance.now()
  await readAll(readers)
  // Rebuilds run in the background: wait until every timeline is materialised. A rebuild that
  // failed (Postgres busy past its connect timeout on a slow host) is not retried until its
  // reader reads again, so those readers read again, a bounded number of times.
  for (let round = 0; ; round++) {
    const states = await r.pipeline(keys.map((k) => ['zrange', k, '-1', '-1'])).exec()
    const cold = readers.filter((_, i) => {
      const s = (states![i]![1] as string[])[0]
      return s !== '\x7fr' && s !== '\x7ft'
    })
    if (!cold.length) break
    if (round >= 3000) throw new Error(`${cold.length} timelines never materialised`)
    if (round % 50 === 49) {
      log(`${cold.length} timelines not materialised yet; reading them again`)
      await readAll(cold)
    }
    await sleep(200)
  }
  log(
    `${readers.length} active followers materialised in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
  )

  const results: number[] = []
  for (let n = 0; n < POSTS; n++) {
    await sleep(500)
    const start = performance.now()
    const { uri } = await net.post(1, { text: `fan-out probe ${n}` })
    const rkey = uri.split('/').pop()!
    let pending = keys
    let rounds = 0
    while (pending.length) {
      rounds++
      const tops = await r.pipeline(pending.map((k) => ['zrange', k, '-2', '-2'])).exec()
      pending = pending.filter((_, i) => !((tops![i]![1] as string[])[0] ?? '').includes(rkey))
      if (performance.now() - start > 60_000)
        throw new Error(`${pending.length} timelines never got ${uri}`)
    }
    const ms = performance.now() - start
    results.push(ms)
    log(
      `post ${n}: in all ${keys.length} active followers' timelines after ${ms.toFixed(0)} ms (${rounds} polls)`,
    )
  }
  const metrics = await (await fetch(`${ours.url}/metrics`)).text()
  const line = (name: string) =>
    metrics
      .split('\n')
      .filter((l) => l.startsWith(name))
      .join('; ')
  log(line('openplane_timeline_fanout_writes_total'))
  log(
    line('openplane_timeline_fanout_seconds_sum'),
    line('openplane_timeline_fanout_seconds_count'),
  )
  const sorted = [...results].sort((a, b) => a - b)
  console.log(
    `\nfan-out latency, author with ${params.num_users - 1} followers, ${keys.length} active: ` +
      `median ${sorted[Math.floor(sorted.length / 2)]!.toFixed(0)} ms, max ${sorted.at(-1)!.toFixed(0)} ms ` +
      `(emit → indexed → fanned out → newest item of every active follower's timeline)`,
  )
} catch (err) {
  // What the server said last is what explains a failed run.
  log(`failed; the server's last output:\n${ours.output().slice(-8000)}`)
  throw err
} finally {
  r.disconnect()
  await ours.stop()
  await net.close()
  await redis.dispose()
}

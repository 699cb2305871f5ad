// pnpm bench:home-script — what the home timeline script (HOME: a reader's timeline, their own
// list and their celebrities' lists in one call) costs Redis per read, on the timelines
// bench:timeline left in a kept Redis. Runs the store's own `home` read for the active readers
// one at a time, with each reader's celebrities (followed accounts with at least
// BENCH_CELEBRITY_FOLLOWERS followers, as the server picks them), and prints Redis's own time
// per call (its INFO commandstats, before and after: nothing is reset), Redis's whole CPU per
// read (INFO cpu: what the read costs it beside the script, as a plain ZRANGE in the same
// transaction, and the connection's reading and writing), the ZRANGEs a call
// makes, the celebrity lists it reads, how many came from the copies the store keeps (the
// first round makes them) and the wall time of a call from here. Only ours has such
// a script, so there is no stock side: this is the Redis part of a read, to measure changes to
// the script. Not part of CI.
//
//   BENCH_REDIS     host:port of the Redis bench:timeline kept its timelines in (required;
//                   readers whose timeline is not there answer without the celebrity reads)
//   BENCH_SCHEMA    the bench:timeline schema (default bench_tl_<num_users in letters>)
//   BENCH_USERBASE  userbase parameter file (as bench:timeline)
//   BENCH_READERS   active readers read, in bench:timeline's order (default 3000)
//   BENCH_ROUNDS    passes over them (default 3)
//   BENCH_CELEBRITY_FOLLOWERS  the server's DATAPLANE_CELEBRITY_FOLLOWERS (default 10000)
import path from 'node:path'
import { performance } from 'node:perf_hooks'
import { readUserbaseParams } from '@openplane/sim'
import {
  createRedisClient,
  parseRedisNodes,
  RedisTimelineStore,
  waitForRedis,
} from '@openplane/timelines'
import pg from 'pg'
import { PG_URL } from '../harness/env.ts'
import { benchReaders, benchSchema } from './timeline.ts'

const root = path.resolve(import.meta.dirname, '../..')
const USERBASE = process.env.BENCH_USERBASE ?? 'packages/sim/examples/userbase-100k-with-posts.json'
const REDIS = process.env.BENCH_REDIS
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const CELEBRITY_FOLLOWERS = Number(process.env.BENCH_CELEBRITY_FOLLOWERS ?? 10_000)
const LIMIT = 50

const log = (...a: unknown[]) => console.log('[bench:home-script]', ...a)

/** Calls and µs of one command from INFO commandstats. */
function commandStat(info: string, command: string): { calls: number; usec: number } {
  const m = new RegExp(`cmdstat_${command}:calls=(\\d+),usec=(\\d+)`).exec(info)
  return { calls: Number(m?.[1] ?? 0), usec: Number(m?.[2] ?? 0) }
}

/** Redis's CPU so far (user and system), seconds, from INFO cpu. */
function redisCpu(info: string): number {
  const of = (name: string) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? NaN)
  return of('used_cpu_user') + of('used_cpu_sys')
}

async function main(): Promise<void> {
  if (!REDIS) throw new Error('BENCH_REDIS: the host:port of a Redis bench:timeline warmed')
  const params = await readUserbaseParams(path.resolve(root, USERBASE))
  const schema = process.env.BENCH_SCHEMA ?? benchSchema(params.num_users)
  const active = params.max_active_user_id
  const count = Math.min(active, Number(process.env.BENCH_READERS ?? 3000))
  const readers = benchReaders(active, count)

  const db = new pg.Client({ connectionString: PG_URL })
  await db.connect()
  const celebrities = new Map<string, string[]>()
  try {
    const { rows } = await db.query<{ creator: string; subjects: string[] }>(
      `select f.creator, array_agg(f."subjectDid") as subjects
         from "${schema}".follow f
         join "${schema}".profile_agg p on p.did = f."subjectDid" and p."followersCount" >= $2
        where f.creator = any($1::text[])
        group by f.creator`,
      [readers, CELEBRITY_FOLLOWERS],
    )
    for (const row of rows) celebrities.set(row.creator, row.subjects)
  } finally {
    await db.end()
  }

  const client = createRedisClient({ nodes: parseRedisNodes(REDIS) })
  const store = new RedisTimelineStore(client)
  try {
    await waitForRedis(client)
    const lists = readers.reduce((n, r) => n + (celebrities.get(r)?.length ?? 0), 0) / count
    log(`${count} readers of ${schema}, ${lists.toFixed(1)} celebrity lists a read on average`)
    let best: { usec: number; cpuUsec: number; zrange: number; p50: number } | undefined
    for (let round = 0; round < ROUNDS; round++) {
      const before = String(await client.info('commandstats'))
      const cpu0 = redisCpu(String(await client.info('cpu')))
      const wall: number[] = []
      let ready = 0
      const copies = { named: 0, used: 0 }
      for (const reader of readers) {
        const t0 = performance.now()
        const read = await store.home(reader, celebrities.get(reader) ?? [], { limit: LIMIT })
        wall.push((performance.now() - t0) * 1000)
        if (read.timeline) ready++
        copies.named += read.copies?.named ?? 0
        copies.used += read.copies?.used ?? 0
      }
      const cpu = redisCpu(String(await client.info('cpu'))) - cpu0
      const after = String(await client.info('commandstats'))
      const [e0, e1] = [commandStat(before, 'evalsha'), commandStat(after, 'evalsha')]
      const [z0, z1] = [commandStat(before, 'zrange'), commandStat(after, 'zrange')]
      const calls = e1.calls - e0.calls
      const usec = (e1.usec - e0.usec) / calls
      const cpuUsec = (cpu * 1e6) / calls
      const zrange = (z1.calls - z0.calls) / calls
      wall.sort((a, b) => a - b)
      const p50 = wall[Math.floor(wall.length / 2)]!
      log(
        `round ${round + 1}: ${calls} calls, Redis ${usec.toFixed(1)} µs a call in the script, ` +
          `${cpuUsec.toFixed(1)} µs of its CPU a read, ${zrange.toFixed(1)} ZRANGEs a call, ` +
          `wall p50 ${p50.toFixed(0)} µs, ${ready} of ${count} timelines materialised, ` +
          `${copies.used} of ${copies.named} celebrity lists from this process's copies`,
      )
      if (!best || cpuUsec < best.cpuUsec) best = { usec, cpuUsec, zrange, p50 }
    }
    // The least loaded round: the script's cost with the least of the machine's noise in it.
    console.log(
      `home-script: redis ${best!.usec.toFixed(1)} us a call, cpu ${best!.cpuUsec.toFixed(1)} us a read, ` +
        `${best!.zrange.toFixed(1)} zrange a call, ` +
        `${lists.toFixed(1)} celebrity lists a read; wall p50 ${best!.p50.toFixed(0)} us`,
    )
  } finally {
    await store.close()
  }
}

if (import.meta.main) await main()

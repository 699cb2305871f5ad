// DATAPLANE_PROCESSES: `openplane start` runs several server processes on consecutive ports, the
// indexer in the first only; each serves, one that dies is restarted, and a SIGTERM stops them
// all cleanly.
import { readdirSync, readFileSync } from 'node:fs'
import net from 'node:net'
import { afterAll, describe, expect, it } from 'vitest'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { startFakeRelay, type FakeRelay } from '../harness/fake-relay.ts'
import { spawnReady, type Child } from '../harness/processes.ts'
import { startRedisServer, type RedisServer } from '../harness/redis-cluster.ts'
import { dropSchemas } from '../harness/stock-network.ts'

/** Whether a port on loopback can be listened on now. */
const free = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const s = net.createServer()
    s.once('error', () => resolve(false))
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)))
  })

/** The first of `n` consecutive free ports. */
async function freeRun(n: number): Promise<number> {
  for (;;) {
    const first = 20_000 + Math.floor(Math.random() * 30_000)
    const all = await Promise.all(Array.from({ length: n }, (_, i) => free(first + i)))
    if (all.every(Boolean)) return first
  }
}

/** Pids of `parent`'s child processes, by their DATAPLANE_PROCESS_INDEX. */
function childrenByIndex(parent: number): Map<number, number> {
  const out = new Map<number, number>()
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      if (ppid !== parent) continue
      const env = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0')
      const index = env.find((e) => e.startsWith('DATAPLANE_PROCESS_INDEX='))?.split('=')[1]
      if (index !== undefined) out.set(Number(index), Number(pid))
    } catch {
      // Gone meanwhile.
    }
  }
  return out
}

const ping = async (url: string): Promise<boolean> =>
  fetch(`${url}/bsky.Service/Ping`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{}',
  }).then(
    (r) => r.ok,
    () => false,
  )

async function until(check: () => Promise<boolean>, ms = 60_000): Promise<void> {
  const end = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > end) throw new Error('timed out')
    await new Promise((r) => setTimeout(r, 200))
  }
}

type Health = { dependencies: { sources?: unknown[]; graphFeed?: { ok: boolean } } }
const health = async (url: string): Promise<Health> =>
  (await (await fetch(`${url}/_health`)).json()) as Health

describe('several server processes on one machine', () => {
  const schema = uniqueName('op_procs')
  let relay: FakeRelay | undefined
  let redis: RedisServer | undefined
  let supervisor: Child | undefined

  afterAll(async () => {
    await supervisor?.stop('SIGKILL')
    await redis?.dispose()
    await relay?.close()
    await dropSchemas([schema])
  })

  it('serves on one port each, restarts a process that dies, and stops them all on SIGTERM', async () => {
    relay = await startFakeRelay([])
    redis = await startRedisServer()
    const port = await freeRun(2)
    const urls = [`http://127.0.0.1:${port}`, `http://127.0.0.1:${port + 1}`]
    supervisor = await spawnReady(
      ['packages/cli/src/main.ts', 'start'],
      {
        DATAPLANE_PROCESSES: '2',
        DATAPLANE_PORT: String(port),
        DB_POSTGRES_URL: PG_URL,
        DB_POSTGRES_SCHEMA: schema,
        DATAPLANE_FIREHOSE_URLS: relay.url,
        DATAPLANE_PLC_URL: 'http://127.0.0.1:1',
        DATAPLANE_ALLOW_PRIVATE_NETWORK: 'true',
        DATAPLANE_TIMELINES: 'redis',
        DATAPLANE_REDIS_NODES: `${redis.host}:${redis.port}`,
        LOG_LEVEL: 'info',
        LOG_FORMAT: 'json',
      },
      urls[0]!,
      '/_health',
    )
    await until(() => ping(urls[1]!))
    expect(await ping(urls[0]!)).toBe(true)
    // The indexer runs in the first process only; the second keeps its graph from the feed.
    expect((await health(urls[0]!)).dependencies.sources).toHaveLength(1)
    await until(async () => (await health(urls[1]!)).dependencies.graphFeed?.ok === true)
    expect((await health(urls[1]!)).dependencies.sources ?? []).toHaveLength(0)
    // The indexer's process began the feed's chain (its client was connected when it did).
    expect(supervisor.output()).not.toMatch(/graph feed (unreadable at start|append failed)/)
    expect(supervisor.output()).toMatch(/list every url in BSKY_DATAPLANE_URLS/)

    // The second dies: the supervisor starts it again on its port.
    const before = childrenByIndex(supervisor.proc.pid!)
    expect([...before.keys()].sort()).toEqual([0, 1])
    process.kill(before.get(1)!, 'SIGKILL')
    await until(async () => !(await ping(urls[1]!)), 10_000)
    await until(() => ping(urls[1]!))
    const after = childrenByIndex(supervisor.proc.pid!)
    expect(after.get(0)).toBe(before.get(0))
    expect(after.get(1)).not.toBe(before.get(1))
    expect(supervisor.output()).toMatch(/server process exited; restarting it/)

    // SIGTERM: every process drains and exits, and so does the supervisor, cleanly.
    expect(await supervisor.stop('SIGTERM')).toBe(0)
    for (const pid of after.values()) expect(() => process.kill(pid, 0)).toThrow()
    expect(await ping(urls[0]!)).toBe(false)
    expect(await ping(urls[1]!)).toBe(false)
  })
})

// The behaviour suite on a 3-master Redis Cluster of our own redis-server processes; then the
// layout (a reader's keys in one slot, readers spread over all masters) and a master failing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { cursorOf, TimelineStoreUnavailable, type TimelineStore } from '@openplane/timelines'
import { keySlot } from '../../packages/timelines/src/slot.ts'
import { startRedisCluster, type RedisCluster } from '../harness/redis-cluster.ts'
import { did, post, timelineStoreBehaviour } from './behaviour.ts'
import { redisFactory } from './redis-factory.ts'

describe('RedisTimelineStore on a Redis Cluster', () => {
  let cluster: RedisCluster | undefined
  const factory = redisFactory(() => cluster!.nodes, true)
  /** Stores with a short deadline, for the failure test. */
  const impatient = redisFactory(() => cluster!.nodes, true, { timeoutMs: 300 })
  beforeAll(async () => {
    cluster = await startRedisCluster(3)
  })
  // The cluster is ours alone: stopping it removes everything written.
  afterAll(async () => {
    await factory.close()
    await impatient.close()
    await cluster?.stop()
  })

  timelineStoreBehaviour(() => factory)

  describe('layout and failure', () => {
    let store: TimelineStore
    const readers = Array.from({ length: 60 }, (_, i) =>
      did(`spread${String.fromCharCode(97 + (i % 26))}${i}`),
    )

    it('spreads readers over every master, one script call per node for a fan-out', async () => {
      store = await impatient.make()
      for (const r of readers) await store.materialise('timeline', r, [], { complete: true })
      const scriptCalls = async (): Promise<number> => {
        const stats = await Promise.all(cluster!.servers.map((s) => s.cli('INFO', 'commandstats')))
        const calls = (s: string, cmd: string) =>
          Number(new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(s)?.[1] ?? 0)
        return stats.reduce((n, s) => n + calls(s, 'evalsha') + calls(s, 'eval'), 0)
      }
      const before = await scriptCalls()
      const item = post(did('author'), new Date().toISOString())
      expect(await store.fanOut(readers, item)).toBe(readers.length)
      // One per master (plus at most one load per master of a script it has not seen yet).
      expect((await scriptCalls()) - before).toBeLessThanOrEqual(2 * cluster!.servers.length)
      for (const r of readers) {
        expect((await store.page(r, { limit: 5 }))!.items.map(cursorOf)).toEqual([cursorOf(item)])
      }
      const perMaster = await Promise.all(
        cluster!.servers.map(async (s) => Number(await s.cli('DBSIZE'))),
      )
      expect(perMaster.every((n) => n > 0)).toBe(true)
    })

    it('computes key slots as Redis Cluster does, the reader DID being the hash tag', async () => {
      const keys = [
        ...readers.slice(0, 10).map((r) => `openplane:tl:t:{${r}}`),
        'plain',
        'a{}b',
        '{x}{y}',
      ]
      for (const key of keys) {
        expect(keySlot(key), key).toBe(
          Number(await cluster!.servers[0]!.cli('CLUSTER', 'KEYSLOT', key)),
        )
      }
      expect(keySlot(`p:t:{${readers[0]}}`)).toBe(keySlot(`q:a:{${readers[0]}}`))
    })

    it('stays correct when slots move under a fan-out (stale slot map: per-reader fallback)', async () => {
      const [from, to] = cluster!.servers
      const ids = await Promise.all([from!, to!].map((s) => s.cli('CLUSTER', 'MYID')))
      await cluster!.cli(
        '--cluster',
        'reshard',
        `${from!.host}:${from!.port}`,
        '--cluster-from',
        ids[0]!,
        '--cluster-to',
        ids[1]!,
        '--cluster-slots',
        '3000',
        '--cluster-yes',
      )
      const item = post(did('author'), new Date().toISOString())
      // A batch that met a moved key may have written some readers before failing over to
      // per-reader calls, which then find them done: the count can fall short, the state cannot.
      expect(await store.fanOut(readers, item)).toBeGreaterThan(0)
      for (const r of readers) {
        expect((await store.page(r, { limit: 5 }))!.items[0]).toEqual(item)
      }
    })

    it('answers TimelineStoreUnavailable quickly when a master dies', async () => {
      await cluster!.servers[2]!.stop()
      const started = Date.now()
      const results = await Promise.allSettled(readers.map((r) => store.page(r, { limit: 5 })))
      expect(Date.now() - started).toBeLessThan(1500)
      const failed = results.filter((r) => r.status === 'rejected')
      expect(failed.length).toBeGreaterThan(0)
      for (const f of failed) expect(f.reason).toBeInstanceOf(TimelineStoreUnavailable)
      const fan = await store
        .fanOut(readers, post(did('author'), new Date().toISOString()))
        .catch((e: unknown) => e)
      expect(fan).toBeInstanceOf(TimelineStoreUnavailable)
      expect((fan as TimelineStoreUnavailable).unconfirmed.length).toBeGreaterThan(0)
    })
  })
})

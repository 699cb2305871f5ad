// Redis-backed stores for the behaviour suite: each store gets its own client and key prefix
// under this run's unique prefix; cleanup deletes only keys under it, on every master.
import {
  createRedisClient,
  RedisTimelineStore,
  waitForRedis,
  type RedisNode,
  type RedisTimelineStoreOptions,
  type TimelineStore,
} from '@openplane/timelines'
import { uniqueName } from '../harness/env.ts'
import type { StoreFactory } from './behaviour.ts'

export interface RedisFactory extends StoreFactory {
  /** Closes the stores (a dead server is fine). */
  close(): Promise<void>
  /** Closes the stores and deletes this run's keys. */
  cleanup(): Promise<void>
}

export function redisFactory(
  nodes: () => RedisNode[],
  cluster: boolean,
  base: RedisTimelineStoreOptions = {},
): RedisFactory {
  const prefix = `${uniqueName('optl')}:`
  const stores: TimelineStore[] = []
  let n = 0
  return {
    async make(opts) {
      const client = createRedisClient({ nodes: nodes(), cluster })
      await waitForRedis(client)
      const store = new RedisTimelineStore(client, {
        timeoutMs: 5000,
        ...base,
        ...opts,
        prefix: `${prefix}${n++}:`,
      })
      stores.push(store)
      return store
    },
    async close() {
      await Promise.allSettled(stores.map((s) => s.close()))
    },
    async cleanup() {
      await this.close()
      await deleteKeys(nodes(), cluster, prefix)
    },
  }
}

/** Deletes every key starting with `prefix`, one key at a time (keys live in many slots). */
export async function deleteKeys(
  nodes: RedisNode[],
  cluster: boolean,
  prefix: string,
): Promise<void> {
  const admin = createRedisClient({ nodes, cluster })
  try {
    await waitForRedis(admin)
    const masters = 'nodes' in admin ? admin.nodes('master') : [admin]
    for (const m of masters) {
      let cursor = '0'
      do {
        const [next, keys] = await m.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000)
        await Promise.all(keys.map((k) => m.unlink(k)))
        cursor = next
      } while (cursor !== '0')
    }
  } finally {
    admin.disconnect()
  }
}

// ioredis clients set up for a store that must fail fast: no offline queue on a single Redis
// (commands while disconnected reject at once), no per-request retries, a command timeout, and
// no auto-pipelining (see below).
import { Cluster, Redis } from 'ioredis'
import { withDeadline } from './errors.ts'

export type RedisClient = Redis | Cluster

/** A Redis by its address, or (one Redis on the same machine) by its Unix socket's path. */
export type RedisNode = { host: string; port: number } | { path: string }

export interface RedisClientOptions {
  /** One Redis, or Cluster seed nodes. */
  nodes: readonly RedisNode[]
  cluster?: boolean
  /**
   * Per command, 1000 by default. 0 sets none on a single Redis, for a caller that bounds every
   * call itself (the store: a deadline per operation): the timer each command would set and
   * clear costs a home read, which sends four commands, more than its merge of copies. A
   * Cluster keeps one always: its node connections queue commands while they connect.
   */
  commandTimeoutMs?: number
  connectTimeoutMs?: number
}

/** `host:port[,host:port…]`, or one socket's absolute path (an env variable's text), into nodes. */
export function parseRedisNodes(spec: string): RedisNode[] {
  return spec
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((s) => {
      if (s.startsWith('/')) return { path: s }
      const i = s.lastIndexOf(':')
      const port = i < 0 ? 6379 : Number(s.slice(i + 1))
      if (!Number.isInteger(port) || port <= 0) throw new TypeError(`bad Redis address: ${s}`)
      return { host: i < 0 ? s : s.slice(0, i), port }
    })
}

/** Reconnect with a short backoff, forever: the store answers Unavailable meanwhile. */
const backoff = (times: number): number => Math.min(50 * times, 1000)

export function createRedisClient(opts: RedisClientOptions): RedisClient {
  const commandTimeout = opts.commandTimeoutMs ?? 1000
  const connectTimeout = opts.connectTimeoutMs ?? 2000
  const [first] = opts.nodes
  if (!first) throw new TypeError('no Redis node given')
  if (opts.cluster) {
    const seeds = opts.nodes.map((node) => {
      if ('path' in node)
        throw new TypeError('a Redis Cluster is reached by host:port, not a socket')
      return node
    })
    return new Cluster(seeds, {
      enableOfflineQueue: false,
      // No auto-pipelining on Cluster: a pipeline that meets MOVED/ASK for only some of its
      // commands hands those errors back instead of following them (batch calls are large anyway).
      enableAutoPipelining: false,
      clusterRetryStrategy: backoff,
      slotsRefreshTimeout: connectTimeout,
      // Node connections keep ioredis' offline queue (they connect lazily on first command);
      // the command timeout bounds how long anything waits in it.
      redisOptions: {
        commandTimeout: commandTimeout || 1000,
        connectTimeout,
        maxRetriesPerRequest: 0,
      },
    })
  }
  return new Redis({
    // A Unix socket spares both sides the TCP stack: a Redis on the same machine.
    ...('path' in first ? { path: first.path } : { host: first.host, port: first.port }),
    enableOfflineQueue: false,
    // No auto-pipelining: it keeps each command's objects (its arguments, the reply) reachable
    // through the pipelines that follow it, so every one of them survives a minor GC and is
    // promoted (about 20 KB per timeline read; measured with --trace-gc-nvp in bench:timeline),
    // which made minor GCs pause 2-4 ms and filled the old space. Reads are one command each,
    // and fan-out batches its keys into script calls already.
    enableAutoPipelining: false,
    maxRetriesPerRequest: 0,
    // ioredis sets a timer for any number given, 0 included.
    ...(commandTimeout ? { commandTimeout } : {}),
    connectTimeout,
    retryStrategy: backoff,
  })
}

/** Resolves once the client can take commands (rejects after `ms`). */
export async function waitForRedis(client: RedisClient, ms = 10_000): Promise<void> {
  if (client.status === 'ready') return
  let onReady: (() => void) | undefined
  const ready = new Promise<void>((resolve) => {
    onReady = () => resolve()
    client.once('ready', onReady)
  })
  try {
    await withDeadline(ready, ms)
  } finally {
    if (onReady) client.off('ready', onReady)
  }
}

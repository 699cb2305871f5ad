// Configuration from the environment, validated up front: a bad value stops the process with a
// message naming the variable instead of surfacing later as a confusing failure. Every setting is
// read here, and only here, so this file is as long as the list of settings (README).
import { readFileSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import { parseDidList } from '@openplane/backfill'
import { allowList, type ConnectionLimits } from '@openplane/server'
import type { SubscribeOptions } from '@openplane/subscribe'
import { DEFAULT_CELEBRITY_COPIES, type RedisNode } from '@openplane/timelines'

export interface Config {
  host: string
  port: number
  /**
   * Server processes `openplane start` runs on this machine, on ports port … port + n − 1 (and
   * ops ports likewise); the first runs the indexer. 1: this process serves.
   */
  processes: number
  /** Connection limits at the rpc port (see @openplane/server's listener). */
  limits: ConnectionLimits
  maxRequestBytes: number
  /** Items a repeated request field may hold before the request is refused (invalid_argument). */
  maxListItems: number
  /** Refuse new rpcs (resource_exhausted) while the event loop lags more than this; 0: never. */
  shedDelayMs: number
  /** GetTimeline reads in progress at once per process; past it, new ones are refused. 0: no bound. */
  maxTimelineReads: number
  /** Rpcs of any kind in progress at once per process; past it, new ones are refused. 0: no bound. */
  maxRpcsInFlight: number
  /** /metrics, /_health, /_ready, /_live and /_wait on their own port instead of the rpc port. */
  ops?: { host: string; port: number }
  tls?: { keyFile: string; certFile: string }
  postgres?: PostgresConfig
  schema: string
  dataDir: string
  plcUrl: string
  allowPrivateNetwork: boolean
  testHandles?: { pdsUrl: string; suffixes: string[] }
  indexer: boolean
  firehoseUrls: string[]
  /**
   * Jetstream instead of the firehose (trusted; JSON, optionally zstd-compressed); `gapMs`: a
   * first event this long after the cursor of a reconnect is a gap it left.
   */
  jetstream?: { url: string; compress: boolean; gapMs: number }
  /**
   * Where repos are listed (com.atproto.sync.listRepos) when a source left a gap (a cursor past
   * its replay window); undefined: the firehose's own host, none for Jetstream.
   */
  gapListUrl?: string
  verifyCommits: boolean
  /**
   * How SearchPosts and SearchActors find things: `fulltext` (words, phrases and the app's
   * operators; the index is built concurrently by the indexing process) or `substring`, the
   * stock's LIKE over every row.
   */
  search: 'substring' | 'fulltext'
  /** Threads decoding and checking firehose frames beside the writer's. */
  decodeWorkers: number
  initialCursor?: number
  batchSize: number
  /** Posts the writer keeps between batches, as committed (0: none; batch/committed-rows.ts). */
  keptPosts: number
  /** Repos whose actor and rev the writer keeps, as committed (0: none; committed-repos.ts). */
  keptRepos: number
  batchWaitMs: number
  /** How often the indexer reads each source's live head, for lag in events (0: never). */
  headProbeMs: number
  /**
   * Keep the follow graph in memory: current from the indexer in this process, or (a server
   * without the indexer) from the change feed the indexer appends to in Redis.
   */
  graph: boolean
  timelines: TimelinesConfig
  backfill: BackfillConfig
  /** Index only these accounts (a community deployment); undefined: the whole network. */
  community?: CommunityConfig
  /** Tail bsync (mutes, notification settings, bookmarks, drafts, …); undefined: not read. */
  bsync?: BsyncConfig
  /**
   * How long the published-event log keeps what the indexer committed, for `/subscribe`
   * (undefined: nothing is published).
   */
  publishWindowMs?: number
  /**
   * `/subscribe`, what was committed as a Jetstream stream, on its own port (process i of
   * DATAPLANE_PROCESSES on port + i); undefined: off.
   */
  subscribe?: SubscribeOptions
  /** Labelers whose labels are subscribed to and stored (DIDs); empty: none. */
  labelers: string[]
  /** Also subscribe to every labeler whose service record is indexed, looked for this often. */
  labelersFromRecords?: { everyMs: number }
}

export interface PostgresConfig {
  url: string
  /** Connections per pool: the writer's and the reads' pools each hold up to this many. */
  poolSize: number
  /** Postgres cancels a read statement running longer (0: no limit). */
  statementTimeoutMs: number
  /** How long a read waits for a connection before answering unavailable. */
  connectTimeoutMs: number
  /** A pooled connection idle this long is closed (0: never). */
  idleTimeoutMs: number
  /** Distinct repeated reads each read connection prepares (0: none). */
  preparedStatements: number
}

export interface BsyncConfig {
  url: string
  apiKey?: string
  httpVersion: '1.1' | '2'
  ignoreBadTls: boolean
}

export interface CommunityConfig {
  /** Accounts always in the community (DATAPLANE_COMMUNITY_DIDS and _DIDS_FILE). */
  dids: string[]
  /** app.bsky.graph.list URIs whose owners and items are members. */
  lists: string[]
  /** Also index the accounts members follow. */
  follows: boolean
}

export interface BackfillConfig {
  /** Repos fetched and written at once (0 in `start`: no backfill worker there). */
  concurrency: number
  /** Fetches at once from one PDS host. */
  perHost: number
  /** A repo's blocks held in memory before the rest goes to a temporary file. */
  memoryBytes: number
  /** A failed repo is fetched again this long after its first failure, doubling each time. */
  retryBaseMs: number
  /** ...up to this long. */
  retryMaxMs: number
  /** Live events held for one repo being fetched, and for all, past which its fetch gives up. */
  holdPerRepo: number
  holdTotal: number
  /** How long one repo's fetch is retried (its live events held) before it is given up. */
  maxHoldMs: number
}

/** The repo gate's bounds, from the backfill's config. */
export function holdLimits(config: Config): { perRepo: number; total: number } {
  return { perRepo: config.backfill.holdPerRepo, total: config.backfill.holdTotal }
}

/** When a failed repo is fetched again, from the backfill's config. */
export function retryPolicy(config: Config): { baseMs: number; maxMs: number } {
  return { baseMs: config.backfill.retryBaseMs, maxMs: config.backfill.retryMaxMs }
}

export interface TimelinesConfig {
  /** Where fan-out timelines live; 'off' answers every home timeline from Postgres. */
  store: 'redis' | 'memory' | 'off'
  redisNodes: RedisNode[]
  redisCluster: boolean
  redisPrefix: string
  /** Entries the graph change feed keeps (a server further behind reloads its graph). */
  graphFeedLength: number
  targetLength: number
  authorTargetLength: number
  /** Followers at which an author's posts are merged at read time instead of fanned out. */
  celebrityFollowers: number
  /** Readers following more than this get a proportional share of fan-out writes. */
  lossyFollowLimit: number
  activeWindowMs: number
  /** Celebrity lists whose top each process keeps a copy of for home reads (0: none). */
  celebrityCopies: number
}

export class ConfigError extends Error {}

type Env = Record<string, string | undefined>

function searchMode(env: Env): Config['search'] {
  const mode = str(env, 'DATAPLANE_SEARCH', 'fulltext').toLowerCase()
  if (mode !== 'fulltext' && mode !== 'substring') {
    throw new ConfigError(`DATAPLANE_SEARCH must be fulltext or substring, got "${mode}"`)
  }
  return mode
}

function str(env: Env, name: string, dflt?: string): string {
  const v = env[name]?.trim()
  if (v) return v
  if (dflt === undefined) throw new ConfigError(`${name} is required`)
  return dflt
}

function int(env: Env, name: string, dflt: number, min: number, max: number): number {
  const raw = env[name]?.trim()
  if (!raw) return dflt
  const n = Number(raw)
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new ConfigError(`${name} must be an integer in [${min}, ${max}], got "${raw}"`)
  }
  return n
}

function bool(env: Env, name: string, dflt: boolean): boolean {
  const raw = env[name]?.trim().toLowerCase()
  if (!raw) return dflt
  if (['1', 'true', 'yes', 'on'].includes(raw)) return true
  if (['0', 'false', 'no', 'off'].includes(raw)) return false
  throw new ConfigError(`${name} must be true or false, got "${raw}"`)
}

function url(env: Env, name: string, dflt: string | undefined, protocols: string[]): string {
  const v = dflt === undefined && !env[name]?.trim() ? '' : str(env, name, dflt)
  if (!v) return v
  let u: URL
  try {
    u = new URL(v)
  } catch {
    throw new ConfigError(`${name} is not a URL: "${v}"`)
  }
  if (!protocols.includes(u.protocol)) {
    throw new ConfigError(`${name} must use ${protocols.join(' or ')}, got "${v}"`)
  }
  return v.replace(/\/+$/, '')
}

function list(env: Env, name: string, dflt: string): string[] {
  return str(env, name, dflt)
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
}

/** 0 or "off" disables the limit (Infinity). */
function limit(env: Env, name: string, dflt: number): number {
  const raw = env[name]?.trim().toLowerCase()
  if (raw === 'off' || raw === '0') return Infinity
  return int(env, name, dflt, 1, 2 ** 31 - 1)
}

function redisNodes(env: Env, name: string): RedisNode[] {
  return list(env, name, '127.0.0.1:6379').map((spec) => {
    // A Redis on the same machine, by its Unix socket.
    if (spec.startsWith('/')) return { path: spec }
    // No slash in a host: a relative socket path is refused, not taken for a host name.
    const m = /^(\[[^\]]+\]|[^:/]+)(?::(\d+))?$/.exec(spec)
    const port = m?.[2] === undefined ? 6379 : Number(m[2])
    if (!m || !m[1] || port < 1 || port > 65535) {
      throw new ConfigError(
        `${name} must be host:port[,host:port...] or a socket's absolute path, got "${spec}"`,
      )
    }
    return { host: m[1].replace(/^\[|\]$/g, ''), port }
  })
}

const LIST_URI =
  /^at:\/\/did:[a-z]+:[A-Za-z0-9._:%-]+\/app\.bsky\.graph\.list\/[A-Za-z0-9._:~-]{1,512}$/

/** DIDs one per line (see parseDidList); a bad line is a configuration error. */
function didList(text: string, source: string): string[] {
  try {
    return parseDidList(text, source)
  } catch (err) {
    throw new ConfigError(err instanceof Error ? err.message : String(err))
  }
}

function community(env: Env): CommunityConfig | undefined {
  const named = didList(
    list(env, 'DATAPLANE_COMMUNITY_DIDS', '').join('\n'),
    'DATAPLANE_COMMUNITY_DIDS',
  )
  const file = env.DATAPLANE_COMMUNITY_DIDS_FILE?.trim()
  if (file) {
    let text: string
    try {
      text = readFileSync(file, 'utf8')
    } catch (err) {
      throw new ConfigError(`DATAPLANE_COMMUNITY_DIDS_FILE: cannot read ${file}: ${String(err)}`)
    }
    named.push(...didList(text, `DATAPLANE_COMMUNITY_DIDS_FILE ${file}`))
  }
  const lists = list(env, 'DATAPLANE_COMMUNITY_LISTS', '')
  for (const uri of lists) {
    if (!LIST_URI.test(uri)) {
      throw new ConfigError(
        `DATAPLANE_COMMUNITY_LISTS must be at://<did>/app.bsky.graph.list/<rkey> URIs, got "${uri}"`,
      )
    }
  }
  const follows = bool(env, 'DATAPLANE_COMMUNITY_FOLLOWS', false)
  if (!named.length && !lists.length) {
    if (follows) {
      throw new ConfigError(
        'DATAPLANE_COMMUNITY_FOLLOWS needs DATAPLANE_COMMUNITY_DIDS, _DIDS_FILE or _LISTS',
      )
    }
    return undefined
  }
  return { dids: [...new Set(named)], lists, follows }
}

function bsync(env: Env, indexer: boolean): BsyncConfig | undefined {
  const bsyncUrl = url(env, 'DATAPLANE_BSYNC_URL', undefined, ['http:', 'https:'])
  if (!bsyncUrl) {
    for (const name of ['DATAPLANE_BSYNC_API_KEY', 'DATAPLANE_BSYNC_HTTP_VERSION']) {
      if (env[name]?.trim()) throw new ConfigError(`${name} needs DATAPLANE_BSYNC_URL`)
    }
    return undefined
  }
  // bsync's state is written by the process that holds the writer, like the firehose's.
  if (!indexer) {
    throw new ConfigError('DATAPLANE_BSYNC_URL needs DATAPLANE_INDEXER=true (the writing process)')
  }
  const httpVersion = str(env, 'DATAPLANE_BSYNC_HTTP_VERSION', '2')
  if (httpVersion !== '1.1' && httpVersion !== '2') {
    throw new ConfigError(`DATAPLANE_BSYNC_HTTP_VERSION must be 1.1 or 2, got "${httpVersion}"`)
  }
  return {
    url: bsyncUrl,
    apiKey: env.DATAPLANE_BSYNC_API_KEY?.trim() || undefined,
    httpVersion,
    ignoreBadTls: bool(env, 'DATAPLANE_BSYNC_IGNORE_BAD_TLS', false),
  }
}

function timelineStore(env: Env): TimelinesConfig['store'] {
  const explicit = env.DATAPLANE_TIMELINES?.trim().toLowerCase()
  const store = explicit || (env.DATAPLANE_REDIS_NODES?.trim() ? 'redis' : 'memory')
  if (store !== 'redis' && store !== 'memory' && store !== 'off') {
    throw new ConfigError(`DATAPLANE_TIMELINES must be redis, memory or off, got "${explicit}"`)
  }
  return store
}

function timelines(env: Env, withGraph: boolean): TimelinesConfig {
  const store = timelineStore(env)
  const prefix = str(env, 'DATAPLANE_REDIS_PREFIX', 'openplane:tl:')
  if (/[{}\s]/.test(prefix)) {
    throw new ConfigError(
      `DATAPLANE_REDIS_PREFIX must not contain braces or spaces, got "${prefix}"`,
    )
  }
  const nodes = redisNodes(env, 'DATAPLANE_REDIS_NODES')
  const cluster = bool(env, 'DATAPLANE_REDIS_CLUSTER', false)
  if (cluster && nodes.some((n) => 'path' in n)) {
    throw new ConfigError('DATAPLANE_REDIS_NODES must be host:port seeds for a Redis Cluster')
  }
  if (nodes.length > 1 && nodes.some((n) => 'path' in n)) {
    throw new ConfigError('DATAPLANE_REDIS_NODES takes one socket path, for one Redis')
  }
  return {
    // Fan-out follows the indexer's commits through the graph: without both, Postgres serves.
    store: withGraph ? store : 'off',
    redisNodes: nodes,
    redisCluster: cluster,
    redisPrefix: prefix,
    graphFeedLength: int(env, 'DATAPLANE_GRAPH_FEED_LENGTH', 1_000_000, 1000, 100_000_000),
    targetLength: int(env, 'DATAPLANE_TIMELINE_LENGTH', 500, 10, 100_000),
    authorTargetLength: int(env, 'DATAPLANE_AUTHOR_TIMELINE_LENGTH', 500, 10, 100_000),
    celebrityFollowers: limit(env, 'DATAPLANE_CELEBRITY_FOLLOWERS', 10_000),
    lossyFollowLimit: limit(env, 'DATAPLANE_LOSSY_FOLLOW_LIMIT', 2000),
    activeWindowMs:
      int(env, 'DATAPLANE_ACTIVE_WINDOW_MINUTES', 7 * 24 * 60, 1, 366 * 24 * 60) * 60_000,
    celebrityCopies: int(env, 'DATAPLANE_CELEBRITY_COPIES', DEFAULT_CELEBRITY_COPIES, 0, 1_000_000),
  }
}

export function readConfig(env: Env = process.env): Config {
  const keyFile = env.DATAPLANE_TLS_KEY?.trim()
  const certFile = env.DATAPLANE_TLS_CERT?.trim()
  if (!!keyFile !== !!certFile) {
    throw new ConfigError('DATAPLANE_TLS_KEY and DATAPLANE_TLS_CERT must be set together')
  }
  const pgUrl = url(env, 'DB_POSTGRES_URL', undefined, ['postgres:', 'postgresql:'])
  const schema = str(env, 'DB_POSTGRES_SCHEMA', 'bsky')
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(schema)) {
    throw new ConfigError(`DB_POSTGRES_SCHEMA must be a plain identifier, got "${schema}"`)
  }
  const jetstreamUrl = url(env, 'DATAPLANE_JETSTREAM_URL', undefined, ['ws:', 'wss:'])
  if (jetstreamUrl && env.DATAPLANE_FIREHOSE_URLS?.trim()) {
    throw new ConfigError('set DATAPLANE_JETSTREAM_URL or DATAPLANE_FIREHOSE_URLS, not both')
  }
  if (jetstreamUrl && bool(env, 'DATAPLANE_VERIFY_COMMITS', false)) {
    throw new ConfigError(
      'DATAPLANE_VERIFY_COMMITS needs the firehose: Jetstream carries nothing to verify',
    )
  }
  const firehoseUrls = jetstreamUrl
    ? []
    : list(env, 'DATAPLANE_FIREHOSE_URLS', 'wss://bsky.network')
  for (const [i, u] of firehoseUrls.entries()) {
    url({ [`DATAPLANE_FIREHOSE_URLS[${i}]`]: u }, `DATAPLANE_FIREHOSE_URLS[${i}]`, u, [
      'ws:',
      'wss:',
    ])
  }
  const indexer = bool(env, 'DATAPLANE_INDEXER', true)
  // A server without the indexer keeps its graph current from the feed in Redis: it needs the
  // Redis store (and the Postgres the indexer writes) to have one at all.
  const graph =
    bool(env, 'DATAPLANE_GRAPH', true) &&
    (indexer || (timelineStore(env) === 'redis' && !!env.DB_POSTGRES_URL?.trim()))
  const testPds = url(env, 'DATAPLANE_TEST_HANDLE_PDS_URL', undefined, ['http:', 'https:'])
  const port = int(env, 'DATAPLANE_PORT', 2585, 0, 65535)
  const ops = opsListener(env)
  const processes = serverProcesses(env, port, ops, !!pgUrl)
  const published = publishing(env, processes)
  return {
    host: str(env, 'DATAPLANE_HOST', '127.0.0.1'),
    port,
    processes,
    limits: connectionLimits(env),
    maxRequestBytes: int(env, 'DATAPLANE_MAX_REQUEST_MB', 16, 1, 1024) * 1024 * 1024,
    // Up to 30,000: a list is bound as one parameter per item, and a statement takes 65,535.
    maxListItems: int(env, 'DATAPLANE_MAX_LIST_ITEMS', 25_000, 100, 30_000),
    shedDelayMs: int(env, 'DATAPLANE_SHED_DELAY_MS', 100, 0, 60_000),
    maxTimelineReads: int(env, 'DATAPLANE_MAX_TIMELINE_READS', 64, 0, 1_000_000),
    maxRpcsInFlight: int(env, 'DATAPLANE_MAX_RPCS_IN_FLIGHT', 256, 0, 1_000_000),
    ops,
    tls: keyFile && certFile ? { keyFile, certFile } : undefined,
    postgres: pgUrl
      ? {
          url: pgUrl,
          poolSize: int(env, 'DB_POSTGRES_POOL_SIZE', 10, 1, 1000),
          statementTimeoutMs: int(env, 'DB_POSTGRES_STATEMENT_TIMEOUT_MS', 30_000, 0, 3_600_000),
          connectTimeoutMs: int(env, 'DB_POSTGRES_CONNECT_TIMEOUT_MS', 5000, 100, 600_000),
          idleTimeoutMs: int(env, 'DB_POSTGRES_IDLE_TIMEOUT_MS', 300_000, 0, 86_400_000),
          // 0 behind a pooler in transaction mode, which cannot keep a session's statements.
          preparedStatements: int(env, 'DB_POSTGRES_PREPARED_STATEMENTS', 200, 0, 10_000),
        }
      : undefined,
    schema,
    dataDir: str(env, 'DATAPLANE_DATA_DIR', '.data'),
    plcUrl: url(env, 'DATAPLANE_PLC_URL', 'https://plc.directory', ['http:', 'https:']),
    allowPrivateNetwork: bool(env, 'DATAPLANE_ALLOW_PRIVATE_NETWORK', false),
    testHandles: testPds
      ? { pdsUrl: testPds, suffixes: list(env, 'DATAPLANE_TEST_HANDLE_SUFFIXES', '.test') }
      : undefined,
    indexer,
    graph,
    timelines: timelines(env, graph),
    firehoseUrls,
    jetstream: jetstreamUrl
      ? {
          url: jetstreamUrl,
          compress: bool(env, 'DATAPLANE_JETSTREAM_COMPRESS', true),
          gapMs: int(env, 'DATAPLANE_JETSTREAM_GAP_SECONDS', 60, 1, 86_400) * 1000,
        }
      : undefined,
    gapListUrl: url(env, 'DATAPLANE_GAP_LIST_URL', undefined, ['http:', 'https:']) || undefined,
    verifyCommits: bool(env, 'DATAPLANE_VERIFY_COMMITS', false),
    search: searchMode(env),
    // One core stays with the writer's thread.
    decodeWorkers: int(
      env,
      'DATAPLANE_DECODE_WORKERS',
      Math.min(4, Math.max(1, availableParallelism() - 1)),
      0,
      64,
    ),
    initialCursor: env.DATAPLANE_FIREHOSE_CURSOR?.trim()
      ? int(env, 'DATAPLANE_FIREHOSE_CURSOR', 0, 0, Number.MAX_SAFE_INTEGER)
      : undefined,
    batchSize: int(env, 'DATAPLANE_BATCH_SIZE', 2000, 1, 100_000),
    keptPosts: int(env, 'DATAPLANE_WRITER_KEPT_POSTS', 100_000, 0, 100_000_000),
    keptRepos: int(env, 'DATAPLANE_WRITER_KEPT_REPOS', 100_000, 0, 100_000_000),
    batchWaitMs: int(env, 'DATAPLANE_BATCH_WAIT_MS', 20, 0, 60_000),
    headProbeMs: int(env, 'DATAPLANE_HEAD_PROBE_SECONDS', 30, 0, 86_400) * 1000,
    backfill: {
      concurrency: int(env, 'DATAPLANE_BACKFILL_CONCURRENCY', 128, 0, 1000),
      perHost: int(env, 'DATAPLANE_BACKFILL_PER_HOST', 4, 1, 1000),
      memoryBytes: int(env, 'DATAPLANE_BACKFILL_MEMORY_MB', 64, 1, 65_536) * 1024 * 1024,
      retryBaseMs: int(env, 'DATAPLANE_BACKFILL_RETRY_SECONDS', 60, 1, 86_400) * 1000,
      retryMaxMs: int(env, 'DATAPLANE_BACKFILL_RETRY_MAX_SECONDS', 21_600, 1, 604_800) * 1000,
      holdPerRepo: int(env, 'DATAPLANE_BACKFILL_HOLD_PER_REPO', 5_000, 1, 10_000_000),
      holdTotal: int(env, 'DATAPLANE_BACKFILL_HOLD_TOTAL', 100_000, 1, 100_000_000),
      maxHoldMs: int(env, 'DATAPLANE_BACKFILL_HOLD_SECONDS', 300, 1, 86_400) * 1000,
    },
    community: community(env),
    ...published,
    bsync: bsync(env, indexer),
    labelers: labelers(env, indexer),
    labelersFromRecords: bool(env, 'DATAPLANE_LABELERS_FROM_RECORDS', false)
      ? { everyMs: int(env, 'DATAPLANE_LABELERS_DISCOVER_SECONDS', 60, 1, 86_400) * 1000 }
      : undefined,
  }
}

function connectionLimits(env: Env): ConnectionLimits {
  const allowFrom = env.DATAPLANE_ALLOW_FROM?.trim()
    ? list(env, 'DATAPLANE_ALLOW_FROM', '')
    : undefined
  if (allowFrom) {
    try {
      allowList(allowFrom)
    } catch (err) {
      throw new ConfigError(`DATAPLANE_ALLOW_FROM: ${(err as Error).message}`)
    }
  }
  return {
    allowFrom,
    maxConnections: int(env, 'DATAPLANE_MAX_CONNECTIONS', 10_000, 1, 1_000_000),
    firstByteMs: int(env, 'DATAPLANE_FIRST_BYTE_TIMEOUT_MS', 10_000, 100, 600_000),
    idleMs: int(env, 'DATAPLANE_IDLE_TIMEOUT_SECONDS', 600, 1, 86_400) * 1000,
    maxStreams: int(env, 'DATAPLANE_MAX_STREAMS', 4000, 1, 1_000_000),
  }
}

/** DATAPLANE_PROCESSES: each process needs ports of its own and a Postgres it can share. */
function serverProcesses(
  env: Env,
  port: number,
  ops: Config['ops'],
  sharedPostgres: boolean,
): number {
  const n = int(env, 'DATAPLANE_PROCESSES', 1, 1, 256)
  if (n === 1) return n
  if (port === 0) {
    throw new ConfigError('DATAPLANE_PROCESSES > 1 needs a fixed DATAPLANE_PORT (not 0)')
  }
  if (port + n - 1 > 65535) {
    throw new ConfigError(`DATAPLANE_PORT + DATAPLANE_PROCESSES − 1 passes 65535`)
  }
  if (ops && (ops.port === 0 || ops.port + n - 1 > 65535)) {
    throw new ConfigError(
      'DATAPLANE_PROCESSES > 1 needs a fixed DATAPLANE_OPS_PORT with room for one port each',
    )
  }
  if (ops && ops.port < port + n && port < ops.port + n) {
    throw new ConfigError(
      `DATAPLANE_OPS_PORT's range (${ops.port}…${ops.port + n - 1}) overlaps DATAPLANE_PORT's (${port}…${port + n - 1})`,
    )
  }
  if (!sharedPostgres) {
    throw new ConfigError(
      'DATAPLANE_PROCESSES > 1 needs DB_POSTGRES_URL: the embedded Postgres belongs to one process',
    )
  }
  return n
}

/** The published-event log's window, and `/subscribe` (which serves it, so needs it kept). */
function publishing(env: Env, processes: number): Pick<Config, 'publishWindowMs' | 'subscribe'> {
  const minutes = int(env, 'DATAPLANE_SUBSCRIBE_WINDOW_MINUTES', 0, 0, 366 * 24 * 60)
  const publishWindowMs = minutes ? minutes * 60_000 : undefined
  if (!env.DATAPLANE_SUBSCRIBE_PORT?.trim()) {
    for (const name of ['DATAPLANE_SUBSCRIBE_HOST', 'DATAPLANE_SUBSCRIBE_MAX_CONSUMERS']) {
      if (env[name]?.trim()) throw new ConfigError(`${name} needs DATAPLANE_SUBSCRIBE_PORT`)
    }
    return { publishWindowMs }
  }
  if (!publishWindowMs) {
    throw new ConfigError(
      'DATAPLANE_SUBSCRIBE_PORT needs DATAPLANE_SUBSCRIBE_WINDOW_MINUTES > 0 (what the stream serves)',
    )
  }
  const port = int(env, 'DATAPLANE_SUBSCRIBE_PORT', 0, 0, 65535)
  if (processes > 1 && (port === 0 || port + processes - 1 > 65535)) {
    throw new ConfigError(
      'DATAPLANE_PROCESSES > 1 needs a fixed DATAPLANE_SUBSCRIBE_PORT with room for one port each',
    )
  }
  return {
    publishWindowMs,
    subscribe: {
      host: str(env, 'DATAPLANE_SUBSCRIBE_HOST', str(env, 'DATAPLANE_HOST', '127.0.0.1')),
      port,
      memoryBytes: int(env, 'DATAPLANE_SUBSCRIBE_MEMORY_MB', 64, 1, 65_536) * 1024 * 1024,
      stallMs: int(env, 'DATAPLANE_SUBSCRIBE_STALL_SECONDS', 30, 1, 3600) * 1000,
      maxConsumers: int(env, 'DATAPLANE_SUBSCRIBE_MAX_CONSUMERS', 10_000, 1, 1_000_000),
      pollMs: int(env, 'DATAPLANE_SUBSCRIBE_POLL_MS', 50, 1, 10_000),
    },
  }
}

function opsListener(env: Env): Config['ops'] {
  if (!env.DATAPLANE_OPS_PORT?.trim()) {
    if (env.DATAPLANE_OPS_HOST?.trim()) {
      throw new ConfigError('DATAPLANE_OPS_HOST needs DATAPLANE_OPS_PORT')
    }
    return undefined
  }
  const port = int(env, 'DATAPLANE_OPS_PORT', 0, 0, 65535)
  if (port !== 0 && port === int(env, 'DATAPLANE_PORT', 2585, 0, 65535)) {
    throw new ConfigError('DATAPLANE_OPS_PORT must differ from DATAPLANE_PORT')
  }
  return { host: str(env, 'DATAPLANE_OPS_HOST', str(env, 'DATAPLANE_HOST', '127.0.0.1')), port }
}

function labelers(env: Env, indexer: boolean): string[] {
  const dids = didList(list(env, 'DATAPLANE_LABELERS', '').join('\n'), 'DATAPLANE_LABELERS')
  if ((dids.length || bool(env, 'DATAPLANE_LABELERS_FROM_RECORDS', false)) && !indexer) {
    throw new ConfigError(
      'DATAPLANE_LABELERS and DATAPLANE_LABELERS_FROM_RECORDS need DATAPLANE_INDEXER=true (the writing process)',
    )
  }
  return [...new Set(dids)]
}

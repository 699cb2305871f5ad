// Wires the components for `openplane start`: the one place that builds every part and hands
// each the others it needs (no part builds another), hence its length; each part's work is in
// its own package.
import { readFileSync } from 'node:fs'
import type { Db } from '@openplane/db'
import {
  Celebrities,
  FanOut,
  GraphFeedReader,
  GraphFeedWriter,
  GraphFollower,
  HomeTimelines,
  openGraph,
  snapshotGraph,
  type FeedSource,
} from '@openplane/fanout'
import { Graph } from '@openplane/graph'
import { createIdentity } from '@openplane/identity'
import { Backfill, BACKFILL_DEFAULTS, GapRepair, RepoTable } from '@openplane/backfill'
import { BsyncConsumer } from '@openplane/bsync'
import { LabelConsumer } from '@openplane/labels'
import { Community } from '@openplane/community'
import {
  IdentityPrefetch,
  keepPublishedWindow,
  Indexer,
  lookupThread,
  Writer,
  type LookupThread,
  type SourceGap,
} from '@openplane/ingest'
import { indexedCollections } from '@openplane/plugins'
import { followedItems, ownItems, startServer } from '@openplane/server'
import { startSubscribe } from '@openplane/subscribe'
import { childLogger } from '@openplane/telemetry'
import {
  createRedisClient,
  MemoryTimelineStore,
  RedisTimelineStore,
  TimelineStoreUnavailable,
  waitForRedis,
  type RedisClient,
  type TimelineStore,
} from '@openplane/timelines'
import { holdLimits, retryPolicy, type Config } from './config.ts'
import { openDatabase, openReadDatabase } from './database.ts'
import { healthReport } from './health.ts'
import { buildSearchIndexInBackground, type SearchIndexBuild } from './search-index.ts'
import { takeWriterLock, type WriterLock } from './writer-lock.ts'

const log = childLogger('start')

export interface Running {
  url: string
  stop(): Promise<void>
}

/** How long requests in flight may take to finish once a stop begins. */
const DRAIN_MS = 10_000

export async function start(config: Config): Promise<Running> {
  const db = await openDatabase(config)
  const reads = openReadDatabase(config, db)
  const identityOptions = {
    plcUrl: config.plcUrl,
    allowPrivateNetwork: config.allowPrivateNetwork,
    testHandles: config.testHandles,
  }
  const identity = createIdentity(identityOptions)
  const fast = !config.graph
    ? undefined
    : config.indexer
      ? await startFanOut(config, db, reads)
      : await startFollower(config, db, reads)
  const indexers: Indexer[] = []
  let prefetch: IdentityPrefetch | undefined
  let lookups: LookupThread | undefined
  let lock: WriterLock | undefined
  let backfill: Backfill | undefined
  let backfilling: Promise<unknown> | undefined
  let gapRepair: GapRepair | undefined
  let community: Community | undefined
  let bsync: BsyncConsumer | undefined
  let labels: LabelConsumer | undefined
  let searchIndex: SearchIndexBuild | undefined
  let stopTrim: (() => Promise<void>) | undefined
  if (config.indexer) {
    lock = await writerLock(db, !config.postgres)
    if (config.search === 'fulltext') searchIndex = buildSearchIndexInBackground(config, db)
    // Handles and account hosting are looked up on their own thread, off the writer's.
    const deps = (lookups = lookupThread({ identity: identityOptions }))
    // A community deployment indexes its accounts only, and asks for a backfill of each one new.
    community = config.community ? await Community.open(db.db, config.community, true) : undefined
    const writer = new Writer(db.db, deps, {
      scope: community,
      hold: holdLimits(config),
      publish: config.publishWindowMs !== undefined,
      transactions: db.transactions,
      keptRows: config.keptPosts,
      keptRepos: config.keptRepos,
    })
    if (config.publishWindowMs !== undefined) {
      stopTrim = keepPublishedWindow(db.db, { windowMs: config.publishWindowMs, everyMs: 60_000 })
    }
    // Live events a crash left held for repos being fetched, applied before any new one.
    const recovered = await writer.recoverHeld()
    if (recovered) log.info({ events: recovered }, 'applied live events held before a restart')
    if (fast?.fanout) writer.onCommitted(fast.fanout.onCommitted)
    if (config.backfill.concurrency === 0) {
      writer.onOutOfSync((dids) =>
        log.warn(
          { repos: dids.length },
          'repos out of sync, and no backfill worker to refetch them',
        ),
      )
    }
    if (community) {
      writer.onCommitted(community.onCommitted)
      if (config.backfill.concurrency === 0) {
        log.warn('DATAPLANE_BACKFILL_CONCURRENCY=0: accounts joining the community are not fetched')
      }
    }
    prefetch = new IdentityPrefetch(db.db, deps)
    if (config.backfill.concurrency > 0) {
      // Repos asked for by `openplane backfill` while this process holds the writer.
      backfill = new Backfill({
        ...BACKFILL_DEFAULTS,
        db: db.db,
        writer,
        didDocs: lookups,
        verify: config.verifyCommits,
        concurrency: config.backfill.concurrency,
        perHost: config.backfill.perHost,
        memoryBytes: config.backfill.memoryBytes,
        workers: config.decodeWorkers,
        retry: retryPolicy(config),
        maxHoldMs: config.backfill.maxHoldMs,
        scope: community,
        prefetch,
      })
      backfill.followResyncs()
      backfilling = backfill.run({ drain: false })
      gapRepair = new GapRepair({ db: db.db, repos: backfill.repos, scope: community })
    }
    const sources = config.jetstream
      ? [{ source: config.jetstream.url, jetstream: jetstreamOptions(config.jetstream) }]
      : config.firehoseUrls.map((source) => ({ source, jetstream: undefined }))
    for (const { source, jetstream } of sources) {
      const indexer = new Indexer({
        source,
        jetstream,
        db: db.db,
        writer,
        idResolver: identity.idResolver,
        verify: config.verifyCommits,
        decodeWorkers: config.decodeWorkers,
        identity: identityOptions,
        keys: (did, refresh) => deps.signingKey(did, refresh),
        batchSize: config.batchSize,
        batchWaitMs: config.batchWaitMs,
        initialCursor: config.initialCursor,
        prefetch,
        headProbeMs: config.headProbeMs,
        jetstreamGapSeconds: config.jetstream && config.jetstream.gapMs / 1000,
        onGap: (gap) =>
          repairGap(gap, config.gapListUrl ?? (jetstream ? undefined : httpOf(source))),
      })
      await indexer.start()
      indexers.push(indexer)
    }
    if (config.bsync) {
      bsync = new BsyncConsumer({ db: db.db, ...config.bsync })
      bsync.start()
    }
    if (config.labelers.length || config.labelersFromRecords) {
      // Labelers named, and (optionally) those the index finds through their service records.
      labels = new LabelConsumer({
        db: db.db,
        idResolver: identity.idResolver,
        labelers: config.labelers,
        discoverEveryMs: config.labelersFromRecords?.everyMs ?? 0,
      })
      labels.start()
    }
  }
  // Feed generators' stream: each serving process reads the log the indexer publishes to.
  const subscribe = config.subscribe ? await startSubscribe(reads.db, config.subscribe) : undefined
  const server = await startServer({
    host: config.host,
    port: config.port,
    limits: config.limits,
    maxRequestBytes: config.maxRequestBytes,
    maxListItems: config.maxListItems,
    shedDelayMs: config.shedDelayMs,
    maxDirectInFlight: config.maxTimelineReads,
    maxRpcsInFlight: config.maxRpcsInFlight,
    ops: config.ops,
    tls: config.tls
      ? { key: readFileSync(config.tls.keyFile), cert: readFileSync(config.tls.certFile) }
      : undefined,
    ctx: {
      db: reads.db,
      identity,
      search: config.search,
      // A server following the feed uses its graph once loaded; Postgres answers until then.
      get graph() {
        return fast && (fast.follower?.ready ?? true) ? fast.graph : undefined
      },
      get timelines() {
        return fast && (fast.follower?.ready ?? true) ? fast.home : undefined
      },
    },
    // /_ready for an orchestrator's readiness probe (/_live only says the process runs).
    health: () =>
      healthReport({
        reads,
        home: fast?.home,
        graphFeed: fast?.follower,
        indexers,
        community,
        bsync,
        labels,
        repos: config.indexer ? new RepoTable(db.db) : undefined,
        gapRepair,
      }),
    control: {
      // Lets tests and operators wait until a firehose seq (fan-out included) and bsync
      // operations are applied.
      async waitFor({ seq, source, bsync: ops, labels: seqs }) {
        if (Object.keys(ops).length) {
          if (!bsync) throw new Error('bsync is not configured (DATAPLANE_BSYNC_URL)')
          await bsync.waitFor(ops)
        }
        if (Object.keys(seqs).length) {
          if (!labels) throw new Error('no labelers are configured (DATAPLANE_LABELERS)')
          await labels.waitFor(seqs)
        }
        if (seq === undefined) return
        // A server without the indexer: caught up with the graph feed as it stands now (wait on
        // the indexer's server first for the seq itself).
        if (fast?.follower) return fast.follower.caughtUp()
        const indexer = indexers.find((i) => i.state().source === source) ?? indexers[0]
        if (!indexer) throw new Error('no indexer is running')
        await indexer.waitFor(seq)
        await fast?.fanout?.idle()
      },
    },
  })
  /** A source left a gap: the repos changed in it are listed and fetched again. */
  function repairGap(gap: SourceGap, host: string | undefined): void {
    if (!gapRepair) {
      log.error(
        { source: gap.source },
        'a source left a gap, and DATAPLANE_BACKFILL_CONCURRENCY=0: the repos it changed are not refetched',
      )
      return
    }
    if (!host) {
      log.error(
        { source: gap.source },
        'Jetstream left a gap: set DATAPLANE_GAP_LIST_URL (a relay) to refetch the repos it changed',
      )
      return
    }
    void gapRepair.repair({ host, after: gap.after })
  }
  return {
    url: server.url,
    async stop() {
      // Requests in flight finish first; then the sources stop, each committing what it applied.
      await server.close(DRAIN_MS)
      await subscribe?.close()
      await bsync?.stop()
      await labels?.stop()
      backfill?.stop()
      await backfilling
      await backfill?.close()
      for (const i of indexers) await i.stop()
      prefetch?.stop()
      await lookups?.stop()
      await searchIndex?.stop()
      await stopTrim?.()
      await fast?.stop()
      await lock?.release()
      if (reads !== db) await reads.close()
      await db.close()
    },
  }
}

/** Jetstream sends only the collections the plugins index (identity and account events too). */
function jetstreamOptions(js: { compress: boolean }) {
  return { compress: js.compress, wantedCollections: indexedCollections() }
}

/** The writer lock, waited for while another process (a `backfill`) holds it. */
async function writerLock(db: Db, embedded: boolean): Promise<WriterLock> {
  const now = await takeWriterLock(db, { wait: false, embedded })
  if (now) return now
  log.warn('another process writes this database (an `openplane backfill`?); waiting for it')
  return (await takeWriterLock(db, { wait: true, embedded }))!
}

/**
 * The graph, and the timelines on it when a store is configured. Lists are built from the reads'
 * pool: a burst of first reads must not take the connections the writer needs.
 */
async function startFanOut(config: Config, db: Db, reads: Db) {
  const { graph } = await openGraph(db)
  const source = feedSource(reads)
  const tl = config.timelines
  const store = await openStore(config)
  const home = store ? homeTimelines(config, store, graph, source) : undefined
  // Servers without the indexer follow the graph through this feed.
  const feedClient = tl.store === 'redis' ? redisClient(config) : undefined
  const feed = feedClient ? new GraphFeedWriter(feedClient, feedOptions(config)) : undefined
  // The client queues nothing while it connects: opening the feed before it is ready failed
  // the chain's first entry, which made every other server reload its graph at the first change.
  if (feedClient) await waitForRedis(feedClient, 5000).catch(() => undefined)
  await feed?.open()
  const fanout = new FanOut(graph, home, source, {
    lossyFollowLimit: tl.lossyFollowLimit,
    feed,
  })
  if (home) {
    // Timelines an earlier process left in Redis must keep receiving fan-out; if Redis cannot
    // say which exist, treat them as stale: they are dropped once it answers.
    await home.loadActive().catch((err: unknown) => {
      if (!(err instanceof TimelineStoreUnavailable)) throw err
      home.writeFailed(err)
    })
    home.startMaintenance()
  }
  return {
    graph,
    home,
    fanout,
    follower: undefined,
    async stop() {
      home?.stopMaintenance()
      await fanout.close()
      // A clean stop leaves a snapshot the next start can begin from.
      await snapshotGraph(db, graph, fanout.applied).catch((err: unknown) =>
        log.warn({ err }, 'graph snapshot failed'),
      )
      await store?.close()
      feedClient?.disconnect()
    },
  }
}

/**
 * A server without the indexer: its graph loaded from Postgres and kept current from the feed,
 * and the same timelines in Redis as the indexer's server (rebuilds and hibernation shared
 * through the store). Until the graph is loaded, Postgres answers everything.
 */
async function startFollower(config: Config, db: Db, reads: Db) {
  const graph = Graph.create(db)
  const celebrities = new Celebrities(graph, config.timelines.celebrityFollowers)
  const store = await openStore(config)
  const home = store
    ? homeTimelines(config, store, graph, feedSource(reads), celebrities)
    : undefined
  const follower = new GraphFollower({
    db,
    graph,
    celebrities,
    // The second connection blocks waiting for entries, longer than a store command may take.
    feed: new GraphFeedReader(
      redisClient(config),
      redisClient(config, 10_000),
      feedOptions(config),
    ),
  })
  // Serving starts at once: Postgres answers until the graph is loaded.
  void follower.start().then(() => home?.startMaintenance())
  return {
    graph,
    home,
    fanout: undefined,
    follower,
    async stop() {
      home?.stopMaintenance()
      await follower.stop()
      await store?.close()
    },
  }
}

function feedSource(reads: Db): FeedSource {
  return {
    followed: (reader, rows) => followedItems(reads.db, reader, undefined, rows),
    byAuthor: (author, rows) => ownItems(reads.db, author, undefined, rows),
  }
}

function homeTimelines(
  config: Config,
  store: TimelineStore,
  graph: Graph,
  source: FeedSource,
  celebrities = new Celebrities(graph, config.timelines.celebrityFollowers),
): HomeTimelines {
  return new HomeTimelines(store, graph, celebrities, source, {
    activeWindowMs: config.timelines.activeWindowMs,
  })
}

function feedOptions(config: Config) {
  const tl = config.timelines
  return { key: `${tl.redisPrefix}graph`, maxLength: tl.graphFeedLength }
}

function redisClient(config: Config, commandTimeoutMs?: number): RedisClient {
  const tl = config.timelines
  return createRedisClient({ nodes: tl.redisNodes, cluster: tl.redisCluster, commandTimeoutMs })
}

async function openStore(config: Config): Promise<TimelineStore | undefined> {
  const tl = config.timelines
  const lengths = { targetLength: tl.targetLength, authorTargetLength: tl.authorTargetLength }
  if (tl.store === 'memory') return new MemoryTimelineStore(lengths)
  if (tl.store === 'off') return undefined
  // No per-command timer: the store bounds each operation with its own deadline.
  const client = redisClient(config, 0)
  // Start without Redis if need be (reads go to Postgres until it answers), but give it a moment.
  await waitForRedis(client, 5000).catch(() =>
    log.warn({ nodes: tl.redisNodes }, 'redis not reachable yet; serving timelines from Postgres'),
  )
  let reported = 0
  return new RedisTimelineStore(client, {
    ...lengths,
    prefix: tl.redisPrefix,
    celebrityCopies: tl.celebrityCopies,
    // Reconnect attempts repeat while Redis is down: log one line per 10 s, not each attempt.
    onError(err) {
      if (Date.now() - reported < 10_000) return
      reported = Date.now()
      log.warn({ err: err.message }, 'redis connection error')
    },
  })
}

/** The https (or http) origin of a ws(s) source: where its host answers xrpc queries. */
function httpOf(source: string): string {
  const u = new URL(source)
  u.protocol = u.protocol === 'wss:' ? 'https:' : 'http:'
  return u.origin
}

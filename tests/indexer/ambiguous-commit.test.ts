// A batch whose COMMIT reached Postgres but whose reply was lost (the connection died in between)
// must reach the graph and the fan-out timelines exactly once, as if nothing had happened. The
// indexer reads a local firehose and writes through a proxy that cuts its connection at the
// chosen moment; everything it ends with is compared with an uninterrupted run. Both ways a batch
// is written: in a transaction on the writer's thread, and on the transaction thread.
import { createPgDb, migrateToLatest } from '@openplane/db'
import { Celebrities, FanOut, HomeTimelines, type FeedSource } from '@openplane/fanout'
import { Graph } from '@openplane/graph'
import { createIdentity } from '@openplane/identity'
import { Indexer, Writer, type Change, type WriterDeps } from '@openplane/ingest'
import { followedItems, ownItems } from '@openplane/server'
import { tid } from '@openplane/sim'
import { MemoryTimelineStore } from '@openplane/timelines'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { startFakeRelay, type CorpusFrame } from '../harness/fake-relay.ts'
import { commitFrame, type CraftOp } from '../harness/frames.ts'
import { diffSchemas, INDEXED_TABLES } from '../harness/indexer.ts'
import { startPgCutProxy, type PgCutProxy } from '../harness/pg-cut-proxy.ts'
import { dropSchemas } from '../harness/stock-network.ts'

const ACCOUNTS = [...'abcdefghijklmnopqrst'].map((c) => `did:plc:ambiguous${c.repeat(15)}`)
const FOLLOW = 'app.bsky.graph.follow'
const POST = 'app.bsky.feed.post'
/** Events per batch: the indexer writes a batch as soon as it holds this many. */
const BATCH = 150
const BASE = Date.parse('2026-01-01T00:00:00.000Z')

/**
 * Two batches. The first: 100 follow creates (each account follows the next five) and 50 posts.
 * The second: 50 of those follows deleted, 50 new follows and 50 more posts.
 */
async function firehose(): Promise<CorpusFrame[]> {
  const n = ACCOUNTS.length
  type Event = { by: number; op: CraftOp }
  const events: Event[] = []
  const follows: Event[] = []
  const follow = (by: number, step: number) => {
    const rkey = tid(BASE * 1000 + by * 100 + step, 1)
    const subject = ACCOUNTS[(by + step) % n]
    const e: Event = { by, op: { action: 'create', collection: FOLLOW, rkey, record: { subject } } }
    follows.push(e)
    events.push(e)
  }
  const post = (by: number, k: number) =>
    events.push({
      by,
      op: { action: 'create', collection: POST, rkey: tid(BASE * 1000 + k, 2), record: {} },
    })
  for (let i = 0; i < 100; i++) {
    follow(i % n, 1 + Math.floor(i / n))
    if (i % 2) post(i % n, i)
  }
  for (let i = 0; i < 50; i++) {
    const { by, op } = follows[i * 2]!
    events.push({ by, op: { action: 'delete', collection: FOLLOW, rkey: op.rkey } })
    follow(i % n, 6 + Math.floor(i / n))
    post(i % n, 1000 + i)
  }
  return Promise.all(
    events.map(async ({ by, op }, i) => {
      const seq = i + 1
      const time = new Date(BASE + seq * 1000).toISOString()
      const $type = op.collection
      const text = `post ${seq}`
      const record =
        op.action === 'delete'
          ? undefined
          : $type === FOLLOW
            ? { $type, ...op.record, createdAt: time }
            : { $type, text, createdAt: time }
      const rev = tid(BASE * 1000 + seq, 3)
      const bytes = await commitFrame(seq, ACCOUNTS[by]!, [{ ...op, record }], time, rev)
      return { seq, bytes }
    }),
  )
}

/** Handles resolve to a name of the account; no account is ever really deleted. */
const deps: WriterDeps = {
  resolveHandle: async (did) => `${did.slice(-5)}.test`,
  isHosted: async () => true,
}

interface Run {
  schema: string
  /** Every change the writer handed to its listeners, as sorted JSON lines. */
  changes: string[]
  /** "follower subject" for every edge of the in-memory graph, sorted. */
  edges: string[]
  /** Each account's home timeline as served from the fan-out store. */
  timelines: Record<string, string[]>
}

/**
 * Runs the indexer over the whole firehose through a fresh proxy; `interrupt` arms cuts on it
 * before the indexer starts. The schema is kept for the caller to compare and drop.
 */
async function indexThroughProxy(
  frames: CorpusFrame[],
  onThread: boolean,
  interrupt?: (proxy: PgCutProxy) => Promise<void>,
): Promise<Run> {
  const schema = uniqueName('op_ambiguous')
  // Migrations, the graph and the timelines' reads use Postgres directly; only the indexer's
  // connections go through the proxy.
  const direct = createPgDb({ url: PG_URL, schema, poolSize: 4 })
  await migrateToLatest(direct)
  const proxy = await startPgCutProxy(PG_URL)
  const viaProxy = createPgDb({ url: proxy.url, schema, poolSize: 4, onPoolError: () => {} })
  const relay = await startFakeRelay(frames)
  try {
    const graph = Graph.create(direct)
    const source: FeedSource = {
      followed: (reader, rows) => followedItems(direct.db, reader, undefined, rows),
      byAuthor: (author, rows) => ownItems(direct.db, author, undefined, rows),
    }
    const store = new MemoryTimelineStore({ targetLength: 1000, authorTargetLength: 1000 })
    const home = new HomeTimelines(store, graph, new Celebrities(graph, Infinity), source, {
      activeWindowMs: 365 * 24 * 3600_000,
    })
    const fanout = new FanOut(graph, home, source, { lossyFollowLimit: Infinity })
    // Every account reads its timeline from the start, so each one is fanned out to.
    for (const did of ACCOUNTS) {
      await home.rebuild(did)
      await home.seedAuthor(did)
    }

    const writer = new Writer(viaProxy.db, deps, {
      transactions: onThread ? viaProxy.transactions : undefined,
    })
    const changes: Change[] = []
    writer.onCommitted((batch) => changes.push(...batch))
    writer.onCommitted(fanout.onCommitted)
    const indexer = new Indexer({
      source: relay.url,
      db: viaProxy.db,
      writer,
      // Never asked: commits are not verified.
      idResolver: createIdentity({ plcUrl: 'http://127.0.0.1:9' }).idResolver,
      verify: false,
      batchSize: BATCH,
      batchWaitMs: 1000,
      initialCursor: 0,
    })
    const interrupted = interrupt?.(proxy)
    await indexer.start()
    await indexer.waitFor(frames.length)
    await interrupted
    await indexer.stop()
    await fanout.idle()

    const edges: string[] = []
    for (const a of ACCOUNTS) {
      for (const b of ACCOUNTS) if (graph.isFollowing(a, b)) edges.push(`${a} ${b}`)
    }
    expect(graph.edgeCount).toBe(edges.length)
    const timelines: Record<string, string[]> = {}
    for (const did of ACCOUNTS) {
      const page = await home.read(did, 100, undefined)
      timelines[did] = page
        ? page.items.map((i) => i.repost || i.uri)
        : ['(not served from the store)']
    }
    return {
      schema,
      changes: changes.map((c) => JSON.stringify(c)).sort(),
      edges: edges.sort(),
      timelines,
    }
  } finally {
    await relay.close()
    await viaProxy.close()
    await proxy.close()
    await direct.close()
  }
}

/** Counts that show at a glance what a run lost or doubled. */
function summary(run: Run) {
  const count = (table: string, op: string) =>
    run.changes.filter((c) => c.startsWith(`{"table":"${table}","op":"${op}"`)).length
  return {
    followInserts: count('follow', 'insert'),
    followDeletes: count('follow', 'delete'),
    feedItemInserts: count('feed_item', 'insert'),
    graphEdges: run.edges.length,
    timelineItems: Object.values(run.timelines).flat().length,
  }
}

async function waitUntil(ok: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000
  while (!ok()) {
    if (Date.now() > deadline) throw new Error('timed out')
    await new Promise((r) => setTimeout(r, 5))
  }
}

describe.each([
  ['on the writer thread', false],
  ['on the transaction thread', true],
])('a batch whose commit reply is lost, written %s', (_, onThread) => {
  let frames: CorpusFrame[]
  let clean: Run
  const schemas: string[] = []

  beforeAll(async () => {
    frames = await firehose()
    clean = await indexThroughProxy(frames, onThread)
    schemas.push(clean.schema)
  })
  afterAll(() => dropSchemas(schemas))

  const expectLikeClean = async (run: Run) => {
    schemas.push(run.schema)
    expect(summary(run)).toEqual(summary(clean))
    expect(run.changes).toEqual(clean.changes)
    expect(run.edges).toEqual(clean.edges)
    expect(run.timelines).toEqual(clean.timelines)
    expect(await diffSchemas(clean.schema, run.schema, INDEXED_TABLES)).toEqual([])
  }

  it('the uninterrupted run has every change once', () => {
    expect(summary(clean)).toEqual({
      followInserts: 150,
      followDeletes: 50,
      feedItemInserts: 100,
      graphEdges: 100,
      timelineItems: expect.any(Number) as number,
    })
    expect(summary(clean).timelineItems).toBeGreaterThan(100)
  })

  it('after the first attempt committed: its changes are delivered, nothing is redone', async () => {
    let cut = false
    const run = await indexThroughProxy(frames, onThread, (proxy) =>
      proxy.cutAfterNextCommit().then(() => void (cut = true)),
    )
    expect(cut).toBe(true)
    await expectLikeClean(run)
  })

  it('after the redo committed, its first attempt having been rolled back', async () => {
    const cuts: string[] = []
    const run = await indexThroughProxy(frames, onThread, async (proxy) => {
      await proxy.cutBeforeNextCommit()
      cuts.push('before')
      await proxy.cutAfterNextCommit()
      cuts.push('after')
    })
    expect(cuts).toEqual(['before', 'after'])
    await expectLikeClean(run)
  })

  it('when Postgres cannot be asked at once: the indexer retries and gets the changes', async () => {
    let refused = 0
    const run = await indexThroughProxy(frames, onThread, async (proxy) => {
      await proxy.cutAfterNextCommit()
      // Unreachable right away, until the writer has tried (and failed) to reach it.
      proxy.down()
      await waitUntil(() => proxy.refused > 0)
      refused = proxy.refused
      proxy.up()
    })
    expect(refused).toBeGreaterThan(0)
    await expectLikeClean(run)
  })
})

describe('the cut proxy', () => {
  const schema = uniqueName('op_cut_proxy')
  const direct = new pg.Client({ connectionString: PG_URL })
  let proxy: PgCutProxy

  beforeAll(async () => {
    await direct.connect()
    await direct.query(`create schema ${schema}; create table ${schema}.t (n int)`)
    proxy = await startPgCutProxy(PG_URL)
  })
  afterAll(async () => {
    await proxy.close()
    await direct.query(`drop schema ${schema} cascade`)
    await direct.end()
  })

  /** Inserts `n` in a transaction through the proxy, committing with `commit`. */
  async function insertThroughProxy(n: number, commit: pg.QueryConfig): Promise<unknown> {
    const client = new pg.Client({ connectionString: proxy.url })
    client.on('error', () => {})
    await client.connect()
    try {
      await client.query('begin')
      await client.query(`insert into ${schema}.t values ($1)`, [n])
      await client.query(commit)
      return undefined
    } catch (err) {
      return err
    } finally {
      await client.end().catch(() => {})
    }
  }
  const stored = async (n: number) =>
    (await direct.query(`select 1 from ${schema}.t where n = $1`, [n])).rowCount === 1

  it('relays a transaction untouched when not armed', async () => {
    expect(await insertThroughProxy(1, { text: 'commit' })).toBeUndefined()
    expect(await stored(1)).toBe(true)
  })

  it.each([
    ['a simple query', { text: ' COMMIT ; ' }],
    ['the extended protocol', { text: 'commit', queryMode: 'extended' as const }],
  ])('cuts after the server committed, sent as %s', async (_, commit) => {
    const cut = proxy.cutAfterNextCommit()
    expect(await insertThroughProxy(2, commit)).toBeInstanceOf(Error)
    await cut
    expect(await stored(2)).toBe(true)
    await direct.query(`delete from ${schema}.t where n = 2`)
  })

  it('cuts before the server sees the COMMIT: rolled back', async () => {
    const cut = proxy.cutBeforeNextCommit()
    expect(await insertThroughProxy(3, { text: 'commit' })).toBeInstanceOf(Error)
    await cut
    expect(await stored(3)).toBe(false)
  })
})

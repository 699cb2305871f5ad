// openplane's side of the fuzzer: the real Writer on its own schema, fed decoded frames in
// batches of a given size (a batch never spans a change of the world, see run.ts), with the
// follow graph and fan-out timelines (in-process store) following its commits, exactly as the
// indexer process wires them. After every commit the counters are checked against their rows.
import { createPgDb, migrateToLatest, type Db } from '@openplane/db'
import { Celebrities, FanOut, HomeTimelines, type FeedSource } from '@openplane/fanout'
import { Graph } from '@openplane/graph'
import { createIdentity, type Identity } from '@openplane/identity'
import { decodeChecked, Writer, writerDeps, type IngestEvent } from '@openplane/ingest'
import { followedItems, ownItems } from '@openplane/server'
import { MemoryTimelineStore } from '@openplane/timelines'
import { PG_URL, uniqueName } from '../env.ts'
import { dropSchemas } from '../stock-network.ts'
import type { EncodedSequence } from './frames.ts'
import { clearSchema, inexactCounters } from './schema.ts'
import { ACCOUNTS, didOf } from './sequence.ts'
import type { WorldServer } from './world.ts'

export interface OurRun {
  graph: Graph
  home: HomeTimelines
  /** The first commit after which a counter differed from its rows, if any. */
  inexact?: { afterEvent: number; lines: string[] }
}

export class OurIndexerUnderTest {
  readonly schema: string
  readonly db: Db
  private readonly identity: Identity

  private constructor(schema: string, db: Db, identity: Identity) {
    this.schema = schema
    this.db = db
    this.identity = identity
  }

  static async start(world: WorldServer): Promise<OurIndexerUnderTest> {
    const schema = uniqueName('fuzz_ours')
    const db = createPgDb({ url: PG_URL, schema, poolSize: 4 })
    await migrateToLatest(db)
    // No caches: the world changes between segments faster than any TTL, and the stock
    // resolves afresh every time.
    const identity = createIdentity({
      plcUrl: world.url,
      allowPrivateNetwork: true,
      timeoutMs: 2000,
      testHandles: { suffixes: ['.test'], pdsUrl: world.url },
      didStaleMs: 0,
      didMaxMs: 0,
      handleTtlMs: 0,
    })
    return new OurIndexerUnderTest(schema, db, identity)
  }

  async play(
    enc: EncodedSequence,
    world: WorldServer,
    opts: { batchSize: number; celebrityFollowers: number },
  ): Promise<OurRun> {
    await clearSchema(this.schema)
    const db = this.db
    const graph = Graph.create(db)
    const source: FeedSource = {
      followed: (reader, rows) => followedItems(db.db, reader, undefined, rows),
      byAuthor: (author, rows) => ownItems(db.db, author, undefined, rows),
    }
    const store = new MemoryTimelineStore({ targetLength: 1000, authorTargetLength: 1000 })
    const home = new HomeTimelines(
      store,
      graph,
      new Celebrities(graph, opts.celebrityFollowers),
      source,
      { activeWindowMs: 365 * 24 * 3600_000 },
    )
    const fanout = new FanOut(graph, home, source, { lossyFollowLimit: Infinity })
    // Every account reads its timeline from the start, so each one is fanned out to.
    for (const a of ACCOUNTS) {
      await home.rebuild(didOf(a))
      await home.seedAuthor(didOf(a))
    }
    const writer = new Writer(db.db, writerDeps(this.identity, 2000), {
      transactions: db.transactions,
    })
    writer.onCommitted(fanout.onCommitted)

    const events: IngestEvent[] = []
    for (const f of enc.frames) {
      // Decoded and checked as the dataplane's decode workers do.
      const res = await decodeChecked(f.bytes, {
        verify: false,
        idResolver: this.identity.idResolver,
      })
      if (res.kind === 'event') events.push(res.event)
      else events.push({ type: 'skip', seq: f.seq, time: new Date().toISOString(), did: '' })
    }
    const run: OurRun = { graph, home }
    for (const { start, end, world: w } of enc.segments) {
      world.set(w)
      for (let i = start; i < end; i += opts.batchSize) {
        const last = Math.min(end, i + opts.batchSize)
        // The next batch of the same world is planned while this one is written.
        const next =
          last < end ? events.slice(last, Math.min(end, last + opts.batchSize)) : undefined
        await writer.applyBatch('fuzz', events.slice(i, last), { next })
        if (run.inexact) continue
        const lines = await inexactCounters(this.schema)
        if (lines.length) run.inexact = { afterEvent: last - 1, lines }
      }
    }
    await fanout.idle()
    return run
  }

  async close(): Promise<void> {
    await this.db.close()
    await dropSchemas([this.schema])
  }
}

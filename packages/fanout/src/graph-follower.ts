// Keeps a server's graph current without the indexer: loads it from Postgres, then applies the
// change feed's entries in order. The feed position is read before the load, so every change
// committed after the load began is in the entries that follow (adding or removing an edge is
// idempotent: replaying one the load already saw converges). A break in the chain reloads the
// graph in the background while the old one keeps serving.
import type { Db } from '@openplane/db'
import { Graph } from '@openplane/graph'
import { childLogger, throttle } from '@openplane/telemetry'
import { compareStreamIds } from '@openplane/timelines'
import type { Celebrities } from './celebrities.ts'
import type { GraphFeedEntry, GraphFeedReader } from './graph-feed.ts'
import { collectLoadGarbage } from './load-garbage.ts'
import { feedApplied, feedReloads, graphEdges } from './metrics.ts'

const log = childLogger('graph-follower')

export interface GraphFollowerOptions {
  db: Db
  graph: Graph
  celebrities: Celebrities
  feed: GraphFeedReader
  /** How long one wait for new entries blocks (a stop waits at most this). */
  blockMs?: number
}

export class GraphFollower {
  readonly #opts: Required<GraphFollowerOptions>
  /** The last entry applied. */
  #at = '0-0'
  #running: Promise<void> | undefined
  #stopped = false
  #lastError: { message: string; at: string } | undefined
  readonly #waiters: { id: string; resolve: () => void }[] = []
  readonly #errorLog = throttle(10_000)

  constructor(opts: GraphFollowerOptions) {
    this.#opts = { blockMs: 2000, ...opts }
  }

  #ready = false

  /**
   * Loads the graph at the feed's current position (retrying while Redis or Postgres is away),
   * then follows the feed. Resolves once loaded; `ready` says so meanwhile.
   */
  start(): Promise<void> {
    const loaded = (async () => {
      for (let attempt = 1; !this.#stopped; attempt++) {
        try {
          await this.#load('start')
          this.#ready = true
          return
        } catch (err) {
          this.#failed(err)
          await new Promise((r) => setTimeout(r, Math.min(5000, 250 * attempt)))
        }
      }
    })()
    this.#running = loaded.then(() => this.#loop())
    return loaded
  }

  /** Whether the graph is loaded (until then, answer from Postgres). */
  get ready(): boolean {
    return this.#ready
  }

  async stop(): Promise<void> {
    if (this.#stopped) return
    this.#stopped = true
    this.#opts.feed.disconnect()
    await this.#running
  }

  /** Resolves once every entry appended before this call is applied. */
  async caughtUp(): Promise<void> {
    const head = await this.#opts.feed.head()
    if (compareStreamIds(this.#at, head) >= 0) return
    await new Promise<void>((resolve) => this.#waiters.push({ id: head, resolve }))
  }

  /** For health: the last entry applied and the last error. */
  status(): { ok: boolean; at: string; lastError?: { message: string; at: string } } {
    return {
      ok: this.#ready,
      at: this.#at,
      ...(this.#lastError && { lastError: this.#lastError }),
    }
  }

  async #load(reason: string): Promise<void> {
    const started = Date.now()
    const { db, graph, celebrities, feed } = this.#opts
    const at = await feed.head()
    const { graph: fresh } = await Graph.loadFromPostgres(db, { ids: graph.ids })
    graph.replaceWith(fresh)
    celebrities.recount()
    // The old graph's bitmaps are garbage now too.
    const gc = collectLoadGarbage()
    this.#at = at
    graphEdges.set(graph.edgeCount)
    feedReloads.inc({ reason })
    log.info(
      { reason, edges: graph.edgeCount, at, ms: Date.now() - started, ...gc },
      'graph loaded',
    )
  }

  async #loop(): Promise<void> {
    while (!this.#stopped) {
      try {
        const entries = await this.#opts.feed.read(this.#at, this.#opts.blockMs)
        for (const entry of entries) {
          if (entry.prev !== this.#at || entry.malformed) {
            log.warn(
              { at: this.#at, next: entry.id, prev: entry.prev, malformed: entry.malformed },
              'graph feed broken (changes missed); reloading the graph',
            )
            await this.#load(entry.malformed ? 'malformed' : 'gap')
            break
          }
          this.#apply(entry)
        }
        this.#wake()
      } catch (err) {
        if (this.#stopped) return
        this.#failed(err)
        await new Promise((r) => setTimeout(r, 500))
      }
    }
  }

  #failed(err: unknown): void {
    this.#lastError = { message: String(err), at: new Date().toISOString() }
    this.#errorLog((suppressed) => log.warn({ err, suppressed }, 'graph feed read failed'))
  }

  #apply(entry: GraphFeedEntry): void {
    const { graph, celebrities } = this.#opts
    for (const op of entry.ops) {
      graph.ids.learn(op.actor, op.actorDid)
      graph.ids.learn(op.subject, op.subjectDid)
      if (op.op === '+') graph.addFollowIds(op.actor, op.subject)
      else graph.removeFollow(op.actor, op.subject)
      celebrities.update(op.subjectDid)
    }
    feedApplied.inc(entry.ops.length)
    graphEdges.set(graph.edgeCount)
    this.#at = entry.id
  }

  #wake(): void {
    for (let i = this.#waiters.length - 1; i >= 0; i--) {
      const w = this.#waiters[i]!
      if (compareStreamIds(this.#at, w.id) >= 0) {
        this.#waiters.splice(i, 1)
        w.resolve()
      }
    }
  }
}

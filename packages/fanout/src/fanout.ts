// The write side: applies each committed batch's follow and feed-item changes to the graph and
// the timelines, in commit order, off the indexer's path (the indexer hands a batch over and
// goes on; a big author's fan-out delays only later fan-out). Graph changes always apply; store
// writes that fail are recorded so the lists they missed are dropped once the store is back.
import { RoaringBitmap32, type Graph } from '@openplane/graph'
import type { Change, FeedItemValues } from '@openplane/ingest'
import { childLogger } from '@openplane/telemetry'
import {
  itemFromFeedRow,
  lossyKeep,
  TimelineStoreUnavailable,
  type TimelineStore,
} from '@openplane/timelines'
import type { Celebrities } from './celebrities.ts'
import type { GraphFeedWriter, GraphOp } from './graph-feed.ts'
import {
  fanoutItems,
  fanoutQueue,
  fanoutSeconds,
  fanoutWrites,
  graphEdges,
  lossyDropped,
} from './metrics.ts'
import type { ReaderActivity } from './reader-activity.ts'
import type { Refills } from './refills.ts'
import type { FeedSource } from './source.ts'
import type { StaleLists, StoreHealth } from './store-health.ts'

const log = childLogger('fanout')

export interface FanOutOptions {
  /** Readers following more accounts than this get a share of writes (Infinity: lossless). */
  lossyFollowLimit: number
  /** Draws for the lossy rule, in [0, 1). */
  random?: () => number
  /** Where other servers learn of follow changes (their graphs follow it). */
  feed?: GraphFeedWriter
}

type FollowRow = Extract<Change, { table: 'follow' }>['row']

/**
 * What fan-out keeps current beside the graph: the store's lists, who is a celebrity (merged at
 * read time instead), which readers are active, the lists being built, and the store's health
 * (a failed write drops what it touched). HomeTimelines holds them.
 */
export interface FanOutTargets {
  store: TimelineStore
  celebrities: Celebrities
  activity: ReaderActivity
  refills: Refills
  health: StoreHealth
}

export class FanOut {
  readonly #graph: Graph
  readonly #to: FanOutTargets | undefined
  readonly #source: FeedSource
  readonly #opts: Required<Omit<FanOutOptions, 'feed'>>
  readonly #feed: GraphFeedWriter | undefined
  /** This batch's follow changes, for the feed. */
  #ops: GraphOp[] = []
  #tail: Promise<void> = Promise.resolve()
  #queued = 0
  /** The last committed position applied, per firehose source. */
  readonly applied = new Map<string, number>()

  /** Without `timelines`, only the graph is kept (no timeline store configured). */
  constructor(
    graph: Graph,
    timelines: FanOutTargets | undefined,
    source: FeedSource,
    opts: FanOutOptions,
  ) {
    this.#graph = graph
    this.#to = timelines && {
      store: timelines.store,
      celebrities: timelines.celebrities,
      activity: timelines.activity,
      refills: timelines.refills,
      health: timelines.health,
    }
    this.#source = source
    const { feed, ...rest } = opts
    this.#opts = { random: Math.random, ...rest }
    this.#feed = feed
    graphEdges.set(graph.edgeCount)
  }

  /** A Writer commit listener: queues the batch and returns at once. */
  readonly onCommitted = (changes: Change[], committed: { source: string; cursor: number }) => {
    this.#queued++
    fanoutQueue.set(this.#queued)
    this.#tail = this.#tail
      .then(() => this.#apply(changes))
      .catch((err: unknown) => log.error({ err }, 'fan-out of a batch failed'))
      .finally(() => {
        this.applied.set(committed.source, committed.cursor)
        this.#queued--
        fanoutQueue.set(this.#queued)
      })
  }

  /** Resolves once every batch handed over so far is applied. */
  async idle(): Promise<void> {
    for (;;) {
      const tail = this.#tail
      await tail
      if (tail === this.#tail) return
    }
  }

  async #apply(changes: Change[]): Promise<void> {
    if (!changes.length) return
    const end = fanoutSeconds.startTimer()
    // Readers whose rebuild started (in any server) before this batch get its writes.
    await this.#to?.activity.sync()
    this.#ops = []
    for (let i = 0; i < changes.length; i++) {
      const c = changes[i]!
      // List items matter to a community's membership, not to timelines.
      if (c.table === 'list_item') continue
      if (c.table === 'follow' && c.op === 'insert') {
        // Consecutive follows intern their DIDs in one round trip.
        const rows = [c.row]
        while (changes[i + 1]?.table === 'follow' && changes[i + 1]!.op === 'insert') {
          rows.push((changes[++i] as { row: FollowRow }).row)
        }
        await this.#follow(rows)
      } else if (c.table === 'follow') {
        await this.#unfollow(c.row)
      } else if (c.op === 'insert') {
        await this.#post(c.row)
      } else {
        await this.#remove(c.row)
      }
    }
    graphEdges.set(this.#graph.edgeCount)
    await this.#feed?.append(this.#ops)
    end()
  }

  /** After the last batch of a clean stop: the feed's chain may continue at the next start. */
  async close(): Promise<void> {
    await this.idle()
    await this.#feed?.close()
  }

  async #follow(rows: FollowRow[]): Promise<void> {
    await retrying('intern follow DIDs', () =>
      this.#graph.addFollows(rows.map((r) => [r.creator, r.subjectDid])),
    )
    for (const r of rows) this.#op('+', r.creator, r.subjectDid)
    const to = this.#to
    for (const { creator, subjectDid } of rows) {
      const change = to?.celebrities.update(subjectDid)
      if (!to) continue
      const spread = change === 'left' ? this.#readers(subjectDid, false) : []
      await this.#write(
        async () => {
          if (change === 'left') await this.#spreadFormerCelebrity(subjectDid, spread)
          // A celebrity's items are merged at read time; anyone else's existing items join the
          // new follower's timeline now, as the stock's fan-in query would show them.
          if (to.celebrities.has(subjectDid) || !(await to.refills.hasTimeline(creator))) return
          const rows = await this.#source.byAuthor(subjectDid, to.store.targetLength)
          await to.store.insert(creator, rows.map(itemFromFeedRow))
        },
        { readers: [creator, ...spread], authors: [] },
      )
    }
  }

  async #unfollow(row: FollowRow): Promise<void> {
    this.#graph.removeFollow(row.creator, row.subjectDid)
    this.#op('-', row.creator, row.subjectDid)
    const to = this.#to
    if (!to) return
    const change = to.celebrities.update(row.subjectDid)
    const spread = change === 'left' ? this.#readers(row.subjectDid, false) : []
    await this.#write(
      async () => {
        await to.store.removeOriginator([row.creator], row.subjectDid)
        if (change === 'left') await this.#spreadFormerCelebrity(row.subjectDid, spread)
      },
      { readers: [row.creator, ...spread], authors: [] },
    )
  }

  async #post(row: FeedItemValues): Promise<void> {
    const to = this.#to
    if (!to) return
    const item = itemFromFeedRow(row)
    const author = row.originatorDid
    // Drawn once: the lossy rule is random, and a failed write must drop the lists it wrote to.
    const readers = to.celebrities.has(author) ? [] : this.#readers(author, true)
    await this.#write(
      async () => {
        // Every author's list takes the item if materialised: own items, celebrity merges.
        await to.store.pushAuthorRecent(author, item)
        if (to.celebrities.has(author)) {
          fanoutItems.inc({ route: 'celebrity' })
          return
        }
        fanoutItems.inc({ route: 'followers' })
        fanoutWrites.inc(await to.store.fanOut(readers, item))
      },
      { readers, authors: [author] },
    )
  }

  async #remove(row: FeedItemValues): Promise<void> {
    const to = this.#to
    if (!to) return
    const item = itemFromFeedRow(row)
    const author = row.originatorDid
    // Followers are asked even for a celebrity: the item may predate its celebrity.
    const readers = this.#readers(author, false)
    await this.#write(
      async () => {
        await to.store.removeAuthorRecent(author, item)
        await to.store.remove(readers, item)
      },
      { readers, authors: [author] },
    )
  }

  /** Records a follow change for the feed (an unknown DID has no edge anywhere: nothing to say). */
  #op(op: '+' | '-', actorDid: string, subjectDid: string): void {
    if (!this.#feed) return
    const actor = this.#graph.ids.id(actorDid)
    const subject = this.#graph.ids.id(subjectDid)
    if (actor === undefined || subject === undefined) return
    this.#ops.push({ op, actor, subject, actorDid, subjectDid })
  }

  /** An author fell below the threshold: its recent items now live in followers' timelines. */
  async #spreadFormerCelebrity(author: string, readers: string[]): Promise<void> {
    const to = this.#to!
    const rows = await this.#source.byAuthor(author, to.store.targetLength)
    for (const row of rows) await to.store.fanOut(readers, itemFromFeedRow(row))
  }

  /**
   * DIDs of the followers that may have a timeline (fan-out skips the rest); `lossy`: thinned by
   * the lossy rule (one draw per fan-out, as Bluesky).
   */
  #readers(author: string, lossy: boolean): string[] {
    const graph = this.#graph
    const active = RoaringBitmap32.and(graph.followers(author), this.#to!.activity.active)
    const ids = active.toUint32Array()
    active.clear()
    const limit = this.#opts.lossyFollowLimit
    const draw = lossy && Number.isFinite(limit) ? this.#opts.random() : undefined
    const dids: string[] = []
    let dropped = 0
    for (const id of ids) {
      if (draw !== undefined && !lossyKeep(graph.followingCount(id), limit, () => draw)) {
        dropped++
        continue
      }
      dids.push(graph.ids.did(id)!)
    }
    if (dropped) lossyDropped.inc(dropped)
    return dids
  }

  /** Store work for one change; if it fails, the lists it may have touched are dropped. */
  async #write(work: () => Promise<void>, touched: StaleLists): Promise<void> {
    try {
      await work()
    } catch (err) {
      const lost =
        err instanceof TimelineStoreUnavailable ? err : new TimelineStoreUnavailable('fanout', err)
      if (!(err instanceof TimelineStoreUnavailable)) log.error({ err }, 'fan-out step failed')
      await this.#to!.health.dropStale(touched, lost)
    }
  }
}

/** Retries until it succeeds: the graph must not skip an edge, and Postgres is needed anyway. */
async function retrying<T>(what: string, work: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work()
    } catch (err) {
      log.warn({ err, attempt }, `${what} failed; retrying`)
      await new Promise((r) => setTimeout(r, Math.min(5000, 100 * 2 ** attempt)))
    }
  }
}

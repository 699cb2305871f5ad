// The read side of fan-out timelines. A home timeline page is the reader's stored timeline, the
// recent items of the celebrities they follow and their own recent items, merged under the
// stock's page rules. Whenever the store cannot answer exactly (list not materialised, page past
// a trimmed horizon, Redis unreachable, or writes lost while it was), the caller answers from
// Postgres instead. A first read builds the lists it lacks, then reads them.
//
// Its parts, each a module of its own: the store's health (store-health.ts), which readers are
// active and hibernation (reader-activity.ts), lists built from Postgres (refills.ts).
import type { Graph } from '@openplane/graph'
import { BUSY_LAG_MS, loopLagMaxMs, Overloaded } from '@openplane/telemetry'
import {
  MemberItems,
  mergeHome,
  TimelineStoreUnavailable,
  TimeoutError,
  type TimeKey,
  type TimelineStore,
} from '@openplane/timelines'
import type { Celebrities } from './celebrities.ts'
import { celebrityLists, reads } from './metrics.ts'
import { ReaderActivity } from './reader-activity.ts'
import { Refills } from './refills.ts'
import type { FeedSource } from './source.ts'
import { StoreHealth, type StaleLists } from './store-health.ts'

export type { StaleLists } from './store-health.ts'

// Bound once: a read counts its lists without looking the labels up.
const copiedLists = celebrityLists.labels('copy')
const readLists = celebrityLists.labels('redis')

export interface HomeOptions {
  /** Readers not seen for this long lose their timeline; fan-out skips them until they return. */
  activeWindowMs: number
  /** After a failed read, go straight to Postgres for this long before trying the store again. */
  retryAfterMs?: number
  /** How long a first read waits for another process's rebuild of its list before Postgres answers. */
  awaitOtherMs?: number
}

/** A page as the store merged it: the items as members (decode with decodeMember). */
export interface HomeMembers {
  members: string[]
  cursor: string
}

/** A page as GetTimeline answers it: each item's post, and its repost ('' for a post). */
export interface HomePage {
  items: { uri: string; repost: string }[]
  cursor: string
}

export class HomeTimelines {
  readonly store: TimelineStore
  readonly graph: Graph
  readonly celebrities: Celebrities
  readonly health: StoreHealth
  readonly activity: ReaderActivity
  readonly refills: Refills
  readonly #timers: NodeJS.Timeout[] = []

  constructor(
    store: TimelineStore,
    graph: Graph,
    celebrities: Celebrities,
    source: FeedSource,
    opts: HomeOptions,
  ) {
    this.store = store
    this.graph = graph
    this.celebrities = celebrities
    this.health = new StoreHealth(store, celebrities, opts.retryAfterMs ?? 1000)
    this.activity = new ReaderActivity(store, graph, this.health, opts.activeWindowMs)
    this.refills = new Refills(store, source, this.activity, this.health, opts.awaitOtherMs ?? 5000)
  }

  /** Ids of readers that may have a timeline in the store (reader-activity.ts). */
  get active() {
    return this.activity.active
  }

  loadActive(): Promise<void> {
    return this.activity.load()
  }

  syncActive(): Promise<void> {
    return this.activity.sync()
  }

  hibernate(now?: number): Promise<number> {
    return this.activity.hibernate(now)
  }

  rebuild(reader: string): Promise<boolean> {
    return this.refills.timeline(reader)
  }

  seedAuthor(author: string): Promise<boolean> {
    return this.refills.author(author)
  }

  hasTimeline(reader: string): Promise<boolean> {
    return this.refills.hasTimeline(reader)
  }

  status(): ReturnType<StoreHealth['status']> {
    return this.health.status()
  }

  dropStale(lists: StaleLists, err: TimelineStoreUnavailable): Promise<void> {
    return this.health.dropStale(lists, err)
  }

  writeFailed(err: TimelineStoreUnavailable): void {
    this.health.writeFailed(err)
  }

  recover(): Promise<void> {
    return this.health.recover()
  }

  /** Starts hibernation (evicting inactive readers) and recovery after lost writes. */
  startMaintenance(): void {
    const every = this.activity.hibernateEvery
    this.#timers.push(setInterval(() => void this.activity.hibernate(), every).unref())
    this.#timers.push(setInterval(() => void this.health.recover(), 1000).unref())
  }

  stopMaintenance(): void {
    for (const t of this.#timers) clearInterval(t)
    this.#timers.length = 0
  }

  /**
   * One page, or undefined when Postgres must answer it. `limit` is already the stock's size.
   * A first read builds what is missing (the reader's timeline, author lists) and reads again,
   * rather than being answered from Postgres while the lists are built beside it: that would
   * run the fan-in query twice for one read, and a burst of first reads (after a restart, a
   * flush) would double its cost on Postgres exactly when it is highest.
   */
  async read(
    reader: string,
    limit: number,
    before: TimeKey | undefined,
  ): Promise<HomePage | undefined> {
    const page = await this.readItems(reader, limit, before)
    return page && { items: page.items.toArray(), cursor: page.cursor }
  }

  /**
   * `read`'s page with its items kept as members, which write the answer's uris as bytes: only
   * the page's own items are decoded, and only what the answer carries.
   */
  async readItems(
    reader: string,
    limit: number,
    before: TimeKey | undefined,
  ): Promise<{ items: MemberItems; cursor: string } | undefined> {
    const page = await this.page(reader, limit, before)
    return page && { items: new MemberItems(page.members), cursor: page.cursor }
  }

  /** `read`'s page as members, for callers that need their order keys (sortAt, cid) too. */
  async page(
    reader: string,
    limit: number,
    before: TimeKey | undefined,
  ): Promise<HomeMembers | undefined> {
    for (let round = 0; ; round++) {
      const got = await this.#readOnce(reader, limit, before)
      if (!('build' in got)) return got.page
      // Twice at most: the timeline first, then the lists of the celebrities it follows. A
      // build that failed (Postgres or the store away) is not retried here: Postgres answers.
      if (round === 2 || !(await Promise.all(got.build)).every(Boolean)) return miss('cold')
    }
  }

  async #readOnce(
    reader: string,
    limit: number,
    before: TimeKey | undefined,
  ): Promise<{ page: HomeMembers | undefined } | { build: Promise<boolean>[] }> {
    const blocked = this.health.readBlocked()
    if (blocked) return { page: miss(blocked) }
    const opts = { limit: limit + 1, before }
    try {
      // The timeline, the reader's own list and the followed celebrities' lists in one read;
      // the celebrities' only down to the timeline page's oldest item when the page is full
      // (nothing older can make the merged page), which keeps big celebrity merges cheap.
      const [, got] = await Promise.all([
        this.activity.touch(reader),
        this.store.home(reader, this.celebrities.followedBy(reader), opts),
      ])
      const { timeline: page, own, celebrities: followed } = got
      if (got.copies && followed) {
        copiedLists.inc(got.copies.used)
        readLists.inc(got.copies.named - got.copies.used)
      }
      const missing = [...(followed?.missing ?? []), ...own.missing]
      if (!page || missing.length) {
        const build = missing.map((author) => this.refills.author(author))
        if (!page) build.push(this.refills.timeline(reader))
        return { build }
      }
      if (!page.complete || !(followed?.complete ?? true) || !own.complete) {
        return { page: miss('trimmed') }
      }
      const merged = mergeHome({
        timeline: page.members,
        celebrities: followed?.members ?? [],
        own: own.members,
        limit,
      })
      reads.inc({ path: 'store', reason: '' })
      return { page: merged }
    } catch (err) {
      if (!(err instanceof TimelineStoreUnavailable)) throw err
      if (err.cause instanceof TimeoutError && loopLagMaxMs() > BUSY_LAG_MS) {
        // Late because this process is behind on its own work (its loop ran late within the
        // last second), not because the store is: the answer most likely waited on this side.
        // Postgres would cost this process more than the store did, so the read is refused
        // rather than moved there, and the store stays in use for the reads after it.
        reads.inc({ path: 'refused', reason: 'overloaded' })
        throw new Overloaded('the timeline store answered later than this busy process could wait')
      }
      this.health.readFailed(err)
      return { page: miss('unavailable') }
    }
  }
}

function miss(reason: string): undefined {
  reads.inc({ path: 'postgres', reason })
  return undefined
}

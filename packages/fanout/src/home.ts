// The read side of fan-out timelines. A home timeline page is the reader's stored timeline, the
// recent items of the celebrities they follow and their own recent items, merged under the
// stock's page rules. Whenever the store cannot answer exactly (list not materialised, page past
// a trimmed horizon, Redis unreachable, or writes lost while it was), the caller answers from
// Postgres instead. A first read builds the lists it lacks, then reads them.
import { RoaringBitmap32, type Graph } from '@openplane/graph'
import { childLogger, throttle } from '@openplane/telemetry'
import {
  feedRowFromItem,
  itemFromFeedRow,
  mergePages,
  TimelineStoreUnavailable,
  type FeedRow,
  type TimeKey,
  type TimelineStore,
} from '@openplane/timelines'
import type { Celebrities } from './celebrities.ts'
import { evicted, reads, rebuilds, staleDropped, storeErrors, storeHealthy } from './metrics.ts'
import type { FeedSource } from './source.ts'

const log = childLogger('timelines')

/** The lists one fan-out write may have touched: readers' timelines and authors' recent lists. */
export interface StaleLists {
  readers: readonly string[]
  authors: readonly string[]
}

export interface HomeOptions {
  /** Readers not seen for this long lose their timeline; fan-out skips them until they return. */
  activeWindowMs: number
  /** After a failed read, go straight to Postgres for this long before trying the store again. */
  retryAfterMs?: number
}

export interface HomePage {
  items: FeedRow[]
  cursor: string
}

/** A rebuild in progress; a removal that reaches it may be missed by its Postgres read. */
interface Rebuild {
  tainted: boolean
  /** Settles when this refill ends: true if the list is built; callers that asked wait on it. */
  done: Promise<boolean>
}

export class HomeTimelines {
  readonly store: TimelineStore
  readonly graph: Graph
  readonly celebrities: Celebrities
  readonly #source: FeedSource
  readonly #opts: Required<HomeOptions>
  readonly #rebuilding = new Map<string, Rebuild>()
  readonly #seeding = new Map<string, Rebuild>()
  readonly #timers: NodeJS.Timeout[] = []
  /** Bumped by every failed write: the store may then hold stale lists until they are dropped. */
  #lostWrites = 0
  #cleanAt = 0
  #readsPausedUntil = 0
  #recovering = false
  #lastError: { message: string; at: string } | undefined
  readonly #staleLog = throttle(10_000)
  /** Rebuilds fail alike while Postgres is away: one line per 10 s. */
  readonly #rebuildFailedLog = throttle(10_000)
  /**
   * Ids of readers that may have a timeline in the store (a superset: whatever this process
   * rebuilt, plus the store's activity index at start and at each hibernation pass). Fan-out
   * writes only to these, so inactive followers cost nothing.
   */
  readonly active = new RoaringBitmap32()
  #activeLoadedAt = 0
  /** Readers marked active while the activity index is re-read: the re-read must keep them. */
  #markedDuringRefresh: number[] | undefined
  /** When this process last recorded each reader's activity: at most once a minute (or a tenth
   * of the window), since activity only needs that precision against the window. */
  #touched = new Map<string, number>()

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
    this.#source = source
    this.#opts = { retryAfterMs: 1000, ...opts }
    storeHealthy.set(1)
  }

  /** Reads the store's activity index into `active` (at start; Redis may hold earlier timelines). */
  async loadActive(): Promise<void> {
    this.#markedDuringRefresh = []
    try {
      const readers = await this.store.activeSince(0)
      const ids = await this.graph.ids.intern(readers)
      const next = new RoaringBitmap32(ids)
      next.addMany(this.#markedDuringRefresh)
      this.active.clear()
      this.active.orInPlace(next)
      this.#activeLoadedAt = Date.now()
    } finally {
      this.#markedDuringRefresh = undefined
    }
  }

  /** Starts hibernation (evicting inactive readers) and recovery after lost writes. */
  startMaintenance(): void {
    const every = Math.max(1000, Math.min(60_000, Math.floor(this.#opts.activeWindowMs / 4)))
    this.#timers.push(setInterval(() => void this.hibernate(), every).unref())
    this.#timers.push(setInterval(() => void this.recover(), 1000).unref())
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
  ): Promise<{ page: HomePage | undefined } | { build: Promise<boolean>[] }> {
    if (this.#lostWrites !== this.#cleanAt) return { page: miss('recovering') }
    if (Date.now() < this.#readsPausedUntil) return { page: miss('unavailable') }
    const opts = { limit: limit + 1, before }
    try {
      // The timeline and the reader's own list first; then the followed celebrities' lists,
      // read only down to the timeline page's oldest item when the page is full (nothing older
      // can make the merged page), which keeps big celebrity merges cheap.
      const [, page, own] = await Promise.all([
        this.#touch(reader),
        this.store.page(reader, opts),
        this.store.authorRecent([reader], opts),
      ])
      const celebs = page ? this.celebrities.followedBy(reader) : []
      const atLeast = page?.items.length === opts.limit ? page.items.at(-1) : undefined
      const followed = celebs.length
        ? await this.store.authorRecent(celebs, { ...opts, atLeast })
        : undefined
      const missing = [...(followed?.missing ?? []), ...own.missing]
      if (!page || missing.length) {
        const build = missing.map((author) => this.seedAuthor(author))
        if (!page) build.push(this.rebuild(reader))
        return { build }
      }
      if (!page.complete || !(followed?.complete ?? true) || !own.complete) {
        return { page: miss('trimmed') }
      }
      const merged = mergePages({
        timeline: page.items,
        celebrities: followed?.items ?? [],
        own: own.items,
        limit,
      })
      reads.inc({ path: 'store', reason: '' })
      return { page: { items: merged.items.map(feedRowFromItem), cursor: merged.cursor } }
    } catch (err) {
      if (!(err instanceof TimelineStoreUnavailable)) throw err
      this.#readFailed(err)
      return { page: miss('unavailable') }
    }
  }

  /**
   * Rebuilds a reader's timeline from Postgres (a second ask waits for the one under way); true
   * once the list is built.
   */
  rebuild(reader: string): Promise<boolean> {
    return this.#refill(this.#rebuilding, reader, 'timeline', async (state) => {
      // Marked before the list starts collecting, so no fan-out meanwhile passes it by.
      const [id] = await this.graph.ids.intern([reader])
      this.active.add(id!)
      this.#markedDuringRefresh?.push(id!)
      await this.store.startRebuild(reader)
      const rows = await this.#source.followed(reader, this.store.targetLength + 1)
      if (state.tainted) return false
      const complete = rows.length <= this.store.targetLength
      await this.store.materialise(reader, rows.map(itemFromFeedRow), { complete })
      return !state.tainted
    })
  }

  /** Seeds an author's recent list (celebrity or own items) from Postgres; true once built. */
  seedAuthor(author: string): Promise<boolean> {
    return this.#refill(this.#seeding, author, 'author', async (state) => {
      await this.store.startAuthorRebuild(author)
      const rows = await this.#source.byAuthor(author, this.store.authorTargetLength + 1)
      if (state.tainted) return false
      const complete = rows.length <= this.store.authorTargetLength
      await this.store.materialiseAuthor(author, rows.map(itemFromFeedRow), { complete })
      return !state.tainted
    })
  }

  /** Whether a reader's timeline should receive backfill: materialised, or being rebuilt. */
  async hasTimeline(reader: string): Promise<boolean> {
    return this.#rebuilding.has(reader) || (await this.store.isMaterialised(reader))
  }

  /** Rebuilds in progress for these readers (or whom `match` picks) must start over. */
  taintReaders(match: (reader: string) => boolean): void {
    for (const [reader, state] of this.#rebuilding) if (match(reader)) state.tainted = true
  }

  taintAuthor(author: string): void {
    const state = this.#seeding.get(author)
    if (state) state.tainted = true
  }

  /**
   * For health: `serving` from the store, `recovering` after a lost write (Postgres serves until
   * every list is dropped), `unreachable` while reads wait out a failed one; and the last error.
   */
  status(): {
    ok: boolean
    state: 'serving' | 'recovering' | 'unreachable'
    lastError?: { message: string; at: string }
  } {
    const state =
      this.#lostWrites !== this.#cleanAt
        ? 'recovering'
        : Date.now() < this.#readsPausedUntil
          ? 'unreachable'
          : 'serving'
    return {
      ok: state === 'serving',
      state,
      ...(this.#lastError && { lastError: this.#lastError }),
    }
  }

  #failed(err: TimelineStoreUnavailable): void {
    storeErrors.inc({ op: err.op })
    this.#lastError = { message: err.message, at: new Date().toISOString() }
  }

  /**
   * A fan-out write failed (often only slow: the store answered after its deadline) and these are
   * the lists it may have missed. Dropping just them keeps every other timeline serving; each
   * dropped one rebuilds on its next read, and a rebuild under way restarts. The drop is sent
   * after the failed write on the same connections, so it lands after it. Only when the drop
   * fails too (the store is really away) are all lists treated as stale.
   */
  async dropStale(lists: StaleLists, err: TimelineStoreUnavailable): Promise<void> {
    const readers = new Set(lists.readers)
    this.taintReaders((r) => readers.has(r))
    for (const author of lists.authors) this.taintAuthor(author)
    try {
      if (readers.size) await this.store.evict([...readers])
      if (lists.authors.length) await this.store.evictAuthors(lists.authors)
    } catch (evictErr) {
      this.writeFailed(evictErr instanceof TimelineStoreUnavailable ? evictErr : err)
      return
    }
    this.#failed(err)
    staleDropped.inc({ kind: 'timeline' }, readers.size)
    staleDropped.inc({ kind: 'author' }, lists.authors.length)
    this.#staleLog((suppressed) =>
      log.warn(
        { err: err.message, readers: readers.size, authors: lists.authors.length, suppressed },
        'timeline write failed; dropped the lists it touched',
      ),
    )
  }

  /** A write did not reach the store: reads go to Postgres until every list is dropped. */
  writeFailed(err: TimelineStoreUnavailable): void {
    this.#failed(err)
    if (this.#lostWrites === this.#cleanAt) {
      log.warn({ err }, 'timeline write lost; serving from Postgres until timelines are reset')
    }
    this.#lostWrites++
    storeHealthy.set(0)
  }

  /** Drops every list once the store answers again, so each rebuilds from Postgres. */
  async recover(): Promise<void> {
    if (this.#lostWrites === this.#cleanAt || this.#recovering) return
    this.#recovering = true
    const generation = this.#lostWrites
    try {
      await this.store.evictInactive(Number.MAX_SAFE_INTEGER)
      await this.store.evictAuthors(this.celebrities.dids())
      this.#cleanAt = generation
      if (this.#lostWrites === this.#cleanAt) {
        storeHealthy.set(1)
        log.info('timeline store back; timelines rebuild on their next read')
      }
    } catch (err) {
      if (!(err instanceof TimelineStoreUnavailable)) log.error({ err }, 'timeline recovery failed')
    } finally {
      this.#recovering = false
    }
  }

  /** Drops the timelines of readers inactive for the window. */
  async hibernate(now = Date.now()): Promise<number> {
    try {
      const n = await this.store.evictInactive(now - this.#opts.activeWindowMs)
      evicted.inc(n)
      // Forget the evicted now and then (the index lists exactly the readers kept): until then
      // they only cost fan-out a check each, and re-reading a large index often would cost more.
      if (n > 0 && now - this.#activeLoadedAt > ACTIVE_RELOAD_MS) await this.loadActive()
      return n
    } catch (err) {
      if (!(err instanceof TimelineStoreUnavailable)) throw err
      this.#failed(err)
      return 0
    }
  }

  async #touch(reader: string): Promise<void> {
    const now = Date.now()
    const every = Math.min(TOUCH_EVERY_MS, this.#opts.activeWindowMs / 10)
    if (now - (this.#touched.get(reader) ?? 0) < every) return
    if (this.#touched.size >= TOUCH_CACHE) this.#touched.clear()
    await this.store.touch(reader, now)
    this.#touched.set(reader, now)
  }

  #readFailed(err: TimelineStoreUnavailable): void {
    this.#failed(err)
    if (Date.now() >= this.#readsPausedUntil) {
      log.warn({ err }, 'timeline store unavailable; serving from Postgres')
    }
    this.#readsPausedUntil = Date.now() + this.#opts.retryAfterMs
  }

  /** One refill per list at a time: a second ask waits for the one under way. */
  #refill(
    running: Map<string, Rebuild>,
    key: string,
    kind: string,
    work: (state: Rebuild) => Promise<boolean>,
  ): Promise<boolean> {
    const current = running.get(key)
    if (current) return current.done
    const state: Rebuild = { tainted: false, done: Promise.resolve(false) }
    running.set(key, state)
    state.done = (async () => {
      try {
        const ok = await work(state)
        rebuilds.inc({ kind, outcome: ok ? 'done' : 'restarted' })
        // A removal raced the Postgres read: drop the list; the next read rebuilds it.
        if (!ok)
          await (kind === 'timeline' ? this.store.evict([key]) : this.store.evictAuthors([key]))
        return ok
      } catch (err) {
        rebuilds.inc({ kind, outcome: 'failed' })
        if (err instanceof TimelineStoreUnavailable) this.writeFailed(err)
        else
          this.#rebuildFailedLog((suppressed) =>
            log.error({ err, key, kind, suppressed }, 'timeline rebuild failed'),
          )
        return false
      } finally {
        running.delete(key)
      }
    })()
    return state.done
  }
}

const TOUCH_EVERY_MS = 60_000
const ACTIVE_RELOAD_MS = 3600_000
const TOUCH_CACHE = 1_000_000

function miss(reason: string): undefined {
  reads.inc({ path: 'postgres', reason })
  return undefined
}

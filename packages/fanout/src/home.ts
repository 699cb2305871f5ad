// The read side of fan-out timelines. A home timeline page is the reader's stored timeline, the
// recent items of the celebrities they follow and their own recent items, merged under the
// stock's page rules. Whenever the store cannot answer exactly (list not materialised, page past
// a trimmed horizon, Redis unreachable, or writes lost while it was), the caller answers from
// Postgres instead. A first read builds the lists it lacks, then reads them.
import { RoaringBitmap32, type Graph } from '@openplane/graph'
import { BUSY_LAG_MS, childLogger, loopLagMaxMs, Overloaded, throttle } from '@openplane/telemetry'
import {
  itemFromFeedRow,
  MemberItems,
  mergeHome,
  TimelineStoreUnavailable,
  TimeoutError,
  type FeedRow,
  type TimeKey,
  type TimelineStore,
} from '@openplane/timelines'
import type { Celebrities } from './celebrities.ts'
import {
  celebrityLists,
  evicted,
  reads,
  rebuilds,
  staleDropped,
  storeErrors,
  storeHealthy,
} from './metrics.ts'
import type { FeedSource } from './source.ts'

// Bound once: a read counts its lists without looking the labels up.
const copiedLists = celebrityLists.labels('copy')
const readLists = celebrityLists.labels('redis')

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

/** A refill in progress in this process; callers that ask meanwhile wait on it. */
interface Rebuild {
  /** Settles when this refill ends: true if the list is built. */
  done: Promise<boolean>
}

/** How a refill's steps touch one kind of list in the store. */
interface ListKind {
  name: 'timeline' | 'author'
  start(key: string): Promise<string | undefined>
  materialise(key: string, rows: FeedRow[], complete: boolean, token: string): Promise<boolean>
  abandon(key: string, token: string): Promise<void>
  /** Ready to read: used while waiting for another process's refill. */
  ready(key: string): Promise<boolean>
  read(key: string, rows: number): Promise<FeedRow[]>
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
  /** Where this process stands in the store's activation log (the fan-out writer reads it). */
  #activationsAt: string | undefined
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
    this.#opts = { retryAfterMs: 1000, awaitOtherMs: 5000, ...opts }
    storeHealthy.set(1)
  }

  /**
   * Reads the store's activity index into `active` (at start; Redis may hold earlier timelines),
   * and notes where the activation log stands: activations after it are read by `syncActive`.
   */
  async loadActive(): Promise<void> {
    this.#markedDuringRefresh = []
    try {
      const at = await this.store.activations(undefined)
      this.#activationsAt = at.next
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

  /**
   * Adds the readers whose rebuild started since the last call (in any process sharing the
   * store) to `active`. The fan-out writer calls it before each batch: a rebuild that started
   * before then gets the batch's writes, one that starts after reads the batch from Postgres. If
   * the log cannot be read, writes may miss a rebuilding list: every list is treated as stale.
   */
  async syncActive(): Promise<void> {
    try {
      // Not read at start (the store was away): the index has everyone the log would add.
      if (this.#activationsAt === undefined) return await this.loadActive()
      const got = await this.store.activations(this.#activationsAt)
      if (got.gap) return await this.loadActive()
      if (got.readers.length) {
        const ids = await this.graph.ids.intern(got.readers)
        this.active.addMany(ids)
        this.#markedDuringRefresh?.push(...ids)
      }
      this.#activationsAt = got.next
    } catch (err) {
      // Whoever activated is unknown (the store, or Postgres interning them, failed): their
      // lists may miss this batch, so all lists count as stale until dropped.
      if (!(err instanceof TimelineStoreUnavailable))
        log.warn({ err }, 'reading activations failed')
      this.writeFailed(
        err instanceof TimelineStoreUnavailable
          ? err
          : new TimelineStoreUnavailable('activations', err),
      )
    }
  }

  /** Starts hibernation (evicting inactive readers) and recovery after lost writes. */
  startMaintenance(): void {
    this.#timers.push(setInterval(() => void this.hibernate(), this.#hibernateEvery()).unref())
    this.#timers.push(setInterval(() => void this.recover(), 1000).unref())
  }

  #hibernateEvery(): number {
    return Math.max(1000, Math.min(60_000, Math.floor(this.#opts.activeWindowMs / 4)))
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
    if (this.#lostWrites !== this.#cleanAt) return { page: miss('recovering') }
    if (Date.now() < this.#readsPausedUntil) return { page: miss('unavailable') }
    const opts = { limit: limit + 1, before }
    try {
      // The timeline, the reader's own list and the followed celebrities' lists in one read;
      // the celebrities' only down to the timeline page's oldest item when the page is full
      // (nothing older can make the merged page), which keeps big celebrity merges cheap.
      const [, got] = await Promise.all([
        this.#touch(reader),
        this.store.home(reader, this.celebrities.followedBy(reader), opts),
      ])
      const { timeline: page, own, celebrities: followed } = got
      if (got.copies && followed) {
        copiedLists.inc(got.copies.used)
        readLists.inc(got.copies.named - got.copies.used)
      }
      const missing = [...(followed?.missing ?? []), ...own.missing]
      if (!page || missing.length) {
        const build = missing.map((author) => this.seedAuthor(author))
        if (!page) build.push(this.rebuild(reader))
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
      this.#readFailed(err)
      return { page: miss('unavailable') }
    }
  }

  /**
   * Rebuilds a reader's timeline from Postgres; true once the list is built. A second ask waits
   * for the rebuild under way, here or (through the store's lease) in another process.
   */
  rebuild(reader: string): Promise<boolean> {
    return this.#refill(this.#rebuilding, reader, this.#timelineKind)
  }

  /** Seeds an author's recent list (celebrity or own items) from Postgres; true once built. */
  seedAuthor(author: string): Promise<boolean> {
    return this.#refill(this.#seeding, author, this.#authorKind)
  }

  readonly #timelineKind: ListKind = {
    name: 'timeline',
    start: async (reader) => {
      // This process's fan-out (if it runs one) includes the reader at once; others learn of it
      // from the store's activation log, which startRebuild appends to.
      const [id] = await this.graph.ids.intern([reader])
      this.active.add(id!)
      this.#markedDuringRefresh?.push(id!)
      return this.store.startRebuild(reader)
    },
    materialise: (reader, rows, complete, token) =>
      this.store.materialise(reader, rows.map(itemFromFeedRow), { complete, token }),
    abandon: (reader, token) => this.store.abandonRebuild(reader, token),
    ready: (reader) => this.store.isMaterialised(reader),
    read: (reader, rows) => this.#source.followed(reader, rows),
  }

  readonly #authorKind: ListKind = {
    name: 'author',
    start: (author) => this.store.startAuthorRebuild(author),
    materialise: (author, rows, complete, token) =>
      this.store.materialiseAuthor(author, rows.map(itemFromFeedRow), { complete, token }),
    abandon: (author, token) => this.store.abandonAuthorRebuild(author, token),
    ready: async (author) =>
      (await this.store.authorRecent([author], { limit: 1 })).missing.length === 0,
    read: (author, rows) => this.#source.byAuthor(author, rows),
  }

  /** Whether a reader's timeline takes fan-out writes: materialised, or being rebuilt. */
  async hasTimeline(reader: string): Promise<boolean> {
    return this.#rebuilding.has(reader) || (await this.store.hasList(reader))
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
   * dropped one rebuilds on its next read, and a rebuild under way is cancelled. The drop is sent
   * after the failed write on the same connections, so it lands after it. Only when the drop
   * fails too (the store is really away) are all lists treated as stale.
   */
  async dropStale(lists: StaleLists, err: TimelineStoreUnavailable): Promise<void> {
    const readers = new Set(lists.readers)
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

  /**
   * Drops the timelines of readers inactive for the window. Of the processes sharing the store,
   * the one holding this period's lease does it (the others would scan the index for nothing).
   */
  async hibernate(now = Date.now()): Promise<number> {
    try {
      const every = this.#hibernateEvery()
      const n = (await this.store.tryLease('hibernate', every - 100))
        ? await this.store.evictInactive(now - this.#opts.activeWindowMs)
        : 0
      evicted.inc(n)
      // Forget the evicted now and then (the index lists exactly the readers kept; another
      // process may have evicted them): until then they only cost fan-out a check each, and
      // re-reading a large index often would cost more.
      if (this.#activationsAt !== undefined && now - this.#activeLoadedAt > ACTIVE_RELOAD_MS) {
        await this.loadActive()
      }
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

  /**
   * One refill per list at a time: a second ask here waits for the one under way; one in another
   * process (the store's lease says so) is waited for too, by watching the list become ready.
   */
  #refill(running: Map<string, Rebuild>, key: string, kind: ListKind): Promise<boolean> {
    const current = running.get(key)
    if (current) return current.done
    const state: Rebuild = { done: Promise.resolve(false) }
    running.set(key, state)
    state.done = (async () => {
      let token: string | undefined
      try {
        token = await kind.start(key)
        if (token === undefined) {
          const ok = await this.#awaitOther(kind, key)
          rebuilds.inc({ kind: kind.name, outcome: ok ? 'waited' : 'wait_timeout' })
          return ok
        }
        const length =
          kind.name === 'timeline' ? this.store.targetLength : this.store.authorTargetLength
        const rows = await kind.read(key, length + 1)
        // False when a removal or an eviction reached the list meanwhile: the next read rebuilds.
        const ok = await kind.materialise(key, rows, rows.length <= length, token)
        rebuilds.inc({ kind: kind.name, outcome: ok ? 'done' : 'restarted' })
        return ok
      } catch (err) {
        rebuilds.inc({ kind: kind.name, outcome: 'failed' })
        if (token !== undefined) await kind.abandon(key, token).catch(() => {})
        // The list was not (or not certainly) written: it is still warming, or gone. Either way
        // it is not read until rebuilt, so nothing stale is served; reads pause as after a
        // failed read.
        if (err instanceof TimelineStoreUnavailable) this.#readFailed(err)
        else
          this.#rebuildFailedLog((suppressed) =>
            log.error({ err, key, kind: kind.name, suppressed }, 'timeline rebuild failed'),
          )
        return false
      } finally {
        running.delete(key)
      }
    })()
    return state.done
  }

  /** Waits (bounded) for another process's refill of the list to make it ready. */
  async #awaitOther(kind: ListKind, key: string): Promise<boolean> {
    const until = Date.now() + this.#opts.awaitOtherMs
    for (let wait = 5; Date.now() < until; wait = Math.min(wait * 2, 100)) {
      await new Promise((r) => setTimeout(r, wait))
      if (await kind.ready(key)) return true
    }
    return false
  }
}

const TOUCH_EVERY_MS = 60_000
const ACTIVE_RELOAD_MS = 3600_000
const TOUCH_CACHE = 1_000_000

function miss(reason: string): undefined {
  reads.inc({ path: 'postgres', reason })
  return undefined
}

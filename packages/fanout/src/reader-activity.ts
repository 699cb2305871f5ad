// Which readers have a timeline worth writing to. Fan-out writes only to readers in `active`: a
// superset of those with a list in the store (whatever this process rebuilt, the store's activity
// index at start and at each hibernation pass, and the activation log other processes append
// to), so inactive followers cost nothing. Reads record activity; readers inactive for the window
// are hibernated (their lists dropped) by whichever process holds the period's lease.
import { RoaringBitmap32, type Graph } from '@openplane/graph'
import { childLogger } from '@openplane/telemetry'
import { TimelineStoreUnavailable, type TimelineStore } from '@openplane/timelines'
import { evicted } from './metrics.ts'
import type { StoreHealth } from './store-health.ts'

const log = childLogger('timelines')

const TOUCH_EVERY_MS = 60_000
const ACTIVE_RELOAD_MS = 3600_000
const TOUCH_CACHE = 1_000_000

export class ReaderActivity {
  /** Ids of readers that may have a timeline in the store. */
  readonly active = new RoaringBitmap32()
  readonly #store: TimelineStore
  readonly #graph: Graph
  readonly #health: StoreHealth
  /** Readers not seen for this long lose their timeline; fan-out skips them until they return. */
  readonly #windowMs: number
  #loadedAt = 0
  /** Readers marked active while the activity index is re-read: the re-read must keep them. */
  #markedDuringRefresh: number[] | undefined
  /** Where this process stands in the store's activation log (the fan-out writer reads it). */
  #activationsAt: string | undefined
  /**
   * When this process last recorded each reader's activity: at most once a minute (or a tenth of
   * the window), since activity only needs that precision against the window.
   */
  readonly #touched = new Map<string, number>()

  constructor(store: TimelineStore, graph: Graph, health: StoreHealth, windowMs: number) {
    this.#store = store
    this.#graph = graph
    this.#health = health
    this.#windowMs = windowMs
  }

  /** How often hibernation runs: a quarter of the window, between a second and a minute. */
  get hibernateEvery(): number {
    return Math.max(1000, Math.min(60_000, Math.floor(this.#windowMs / 4)))
  }

  /**
   * Reads the store's activity index into `active` (at start; Redis may hold earlier timelines),
   * and notes where the activation log stands: activations after it are read by `sync`.
   */
  async load(): Promise<void> {
    this.#markedDuringRefresh = []
    try {
      const at = await this.#store.activations(undefined)
      this.#activationsAt = at.next
      const readers = await this.#store.activeSince(0)
      const ids = await this.#graph.ids.intern(readers)
      const next = new RoaringBitmap32(ids)
      next.addMany(this.#markedDuringRefresh)
      this.active.clear()
      this.active.orInPlace(next)
      this.#loadedAt = Date.now()
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
  async sync(): Promise<void> {
    try {
      // Not read at start (the store was away): the index has everyone the log would add.
      if (this.#activationsAt === undefined) return await this.load()
      const got = await this.#store.activations(this.#activationsAt)
      if (got.gap) return await this.load()
      if (got.readers.length) {
        const ids = await this.#graph.ids.intern(got.readers)
        this.active.addMany(ids)
        this.#markedDuringRefresh?.push(...ids)
      }
      this.#activationsAt = got.next
    } catch (err) {
      // Whoever activated is unknown (the store, or Postgres interning them, failed): their
      // lists may miss this batch, so all lists count as stale until dropped.
      if (!(err instanceof TimelineStoreUnavailable))
        log.warn({ err }, 'reading activations failed')
      this.#health.writeFailed(
        err instanceof TimelineStoreUnavailable
          ? err
          : new TimelineStoreUnavailable('activations', err),
      )
    }
  }

  /**
   * A reader whose timeline is being rebuilt here: this process's fan-out includes it at once
   * (others learn of it from the activation log, which the rebuild appends to).
   */
  async mark(reader: string): Promise<void> {
    const [id] = await this.#graph.ids.intern([reader])
    this.active.add(id!)
    this.#markedDuringRefresh?.push(id!)
  }

  /** Records that the reader read, at most once per interval. */
  async touch(reader: string): Promise<void> {
    const now = Date.now()
    const every = Math.min(TOUCH_EVERY_MS, this.#windowMs / 10)
    if (now - (this.#touched.get(reader) ?? 0) < every) return
    if (this.#touched.size >= TOUCH_CACHE) this.#touched.clear()
    await this.#store.touch(reader, now)
    this.#touched.set(reader, now)
  }

  /**
   * Drops the timelines of readers inactive for the window. Of the processes sharing the store,
   * the one holding this period's lease does it (the others would scan the index for nothing).
   */
  async hibernate(now = Date.now()): Promise<number> {
    try {
      const n = (await this.#store.tryLease('hibernate', this.hibernateEvery - 100))
        ? await this.#store.evictInactive(now - this.#windowMs)
        : 0
      evicted.inc(n)
      // Forget the evicted now and then (the index lists exactly the readers kept; another
      // process may have evicted them): until then they only cost fan-out a check each, and
      // re-reading a large index often would cost more.
      if (this.#activationsAt !== undefined && now - this.#loadedAt > ACTIVE_RELOAD_MS) {
        await this.load()
      }
      return n
    } catch (err) {
      if (!(err instanceof TimelineStoreUnavailable)) throw err
      this.#health.failed(err)
      return 0
    }
  }
}

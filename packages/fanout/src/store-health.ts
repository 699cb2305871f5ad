// Whether the timeline store may answer reads. Two ways it may not: a read failed (reads go to
// Postgres for a pause, then try the store again), or a write was lost (the store may hold lists
// missing it: Postgres answers until every list is dropped, and `recover` drops them once the
// store answers). A failed fan-out write that only touched some lists drops just those.
import { childLogger, throttle } from '@openplane/telemetry'
import { TimelineStoreUnavailable, type TimelineStore } from '@openplane/timelines'
import type { Celebrities } from './celebrities.ts'
import { staleDropped, storeErrors, storeHealthy } from './metrics.ts'

const log = childLogger('timelines')

/** The lists one fan-out write may have touched: readers' timelines and authors' recent lists. */
export interface StaleLists {
  readers: readonly string[]
  authors: readonly string[]
}

export type HealthState = 'serving' | 'recovering' | 'unreachable'

export class StoreHealth {
  readonly #store: TimelineStore
  readonly #celebrities: Celebrities
  /** After a failed read, go straight to Postgres for this long before trying the store again. */
  readonly #retryAfterMs: number
  /** Bumped by every lost write: the store may then hold stale lists until they are dropped. */
  #lostWrites = 0
  #cleanAt = 0
  #readsPausedUntil = 0
  #recovering = false
  #lastError: { message: string; at: string } | undefined
  readonly #staleLog = throttle(10_000)

  constructor(store: TimelineStore, celebrities: Celebrities, retryAfterMs: number) {
    this.#store = store
    this.#celebrities = celebrities
    this.#retryAfterMs = retryAfterMs
    storeHealthy.set(1)
  }

  /** Why reads may not use the store now (a reason for the metrics), or undefined if they may. */
  readBlocked(): 'recovering' | 'unavailable' | undefined {
    if (this.#lostWrites !== this.#cleanAt) return 'recovering'
    if (Date.now() < this.#readsPausedUntil) return 'unavailable'
    return undefined
  }

  /**
   * For health: `serving` from the store, `recovering` after a lost write (Postgres serves until
   * every list is dropped), `unreachable` while reads wait out a failed one; and the last error.
   */
  status(): { ok: boolean; state: HealthState; lastError?: { message: string; at: string } } {
    const blocked = this.readBlocked()
    const state = blocked === 'unavailable' ? 'unreachable' : (blocked ?? 'serving')
    return {
      ok: state === 'serving',
      state,
      ...(this.#lastError && { lastError: this.#lastError }),
    }
  }

  /** A store operation failed: counted, and kept as the last error. */
  failed(err: TimelineStoreUnavailable): void {
    storeErrors.inc({ op: err.op })
    this.#lastError = { message: err.message, at: new Date().toISOString() }
  }

  /** A read (or a refill) failed: reads go to Postgres for a while. */
  readFailed(err: TimelineStoreUnavailable): void {
    this.failed(err)
    if (Date.now() >= this.#readsPausedUntil) {
      log.warn({ err }, 'timeline store unavailable; serving from Postgres')
    }
    this.#readsPausedUntil = Date.now() + this.#retryAfterMs
  }

  /** A write did not reach the store: reads go to Postgres until every list is dropped. */
  writeFailed(err: TimelineStoreUnavailable): void {
    this.failed(err)
    if (this.#lostWrites === this.#cleanAt) {
      log.warn({ err }, 'timeline write lost; serving from Postgres until timelines are reset')
    }
    this.#lostWrites++
    storeHealthy.set(0)
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
      if (readers.size) await this.#store.evict([...readers])
      if (lists.authors.length) await this.#store.evictAuthors(lists.authors)
    } catch (evictErr) {
      this.writeFailed(evictErr instanceof TimelineStoreUnavailable ? evictErr : err)
      return
    }
    this.failed(err)
    staleDropped.inc({ kind: 'timeline' }, readers.size)
    staleDropped.inc({ kind: 'author' }, lists.authors.length)
    this.#staleLog((suppressed) =>
      log.warn(
        { err: err.message, readers: readers.size, authors: lists.authors.length, suppressed },
        'timeline write failed; dropped the lists it touched',
      ),
    )
  }

  /** Drops every list once the store answers again, so each rebuilds from Postgres. */
  async recover(): Promise<void> {
    if (this.#lostWrites === this.#cleanAt || this.#recovering) return
    this.#recovering = true
    const generation = this.#lostWrites
    try {
      await this.#store.evictInactive(Number.MAX_SAFE_INTEGER)
      await this.#store.evictAuthors(this.#celebrities.dids())
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
}

// Lists built from Postgres: a reader's timeline (on its first read, or after it was dropped) and
// an author's recent list (celebrities' and readers' own items, merged at read time). One refill
// per list at a time, across processes: the store's lease names who builds it; the others wait
// for it to become ready. A refill that fails leaves the list unread until rebuilt, so nothing
// stale is served.
import { childLogger, throttle } from '@openplane/telemetry'
import {
  itemFromFeedRow,
  TimelineStoreUnavailable,
  type FeedRow,
  type ListKind,
  type TimelineStore,
} from '@openplane/timelines'
import { rebuilds } from './metrics.ts'
import type { ReaderActivity } from './reader-activity.ts'
import type { FeedSource } from './source.ts'
import type { StoreHealth } from './store-health.ts'

const log = childLogger('timelines')

/** A refill in progress in this process; callers that ask meanwhile wait on it. */
interface Refill {
  /** Settles when this refill ends: true if the list is built. */
  done: Promise<boolean>
}

/** What differs between refills of the two kinds of list. */
interface Kind {
  name: ListKind
  /** Rows a complete list holds. */
  length(): number
  start(key: string): Promise<string | undefined>
  /** Ready to read: used while waiting for another process's refill. */
  ready(key: string): Promise<boolean>
  read(key: string, rows: number): Promise<FeedRow[]>
}

export class Refills {
  readonly #health: StoreHealth
  /** How long a first read waits for another process's refill of its list. */
  readonly #awaitOtherMs: number
  readonly #timelines = new Map<string, Refill>()
  readonly #authors = new Map<string, Refill>()
  readonly #store: TimelineStore
  /** Refills fail alike while Postgres is away: one line per 10 s. */
  readonly #failedLog = throttle(10_000)
  readonly #timelineKind: Kind
  readonly #authorKind: Kind

  constructor(
    store: TimelineStore,
    source: FeedSource,
    activity: ReaderActivity,
    health: StoreHealth,
    awaitOtherMs: number,
  ) {
    this.#store = store
    this.#health = health
    this.#awaitOtherMs = awaitOtherMs
    this.#timelineKind = {
      name: 'timeline',
      length: () => store.targetLength,
      start: async (reader) => {
        await activity.mark(reader)
        return store.startRebuild('timeline', reader)
      },
      ready: (reader) => store.isMaterialised(reader),
      read: (reader, rows) => source.followed(reader, rows),
    }
    this.#authorKind = {
      name: 'author',
      length: () => store.authorTargetLength,
      start: (author) => store.startRebuild('author', author),
      ready: async (author) =>
        (await store.authorRecent([author], { limit: 1 })).missing.length === 0,
      read: (author, rows) => source.byAuthor(author, rows),
    }
  }

  /**
   * Rebuilds a reader's timeline from Postgres; true once the list is built. A second ask waits
   * for the rebuild under way, here or (through the store's lease) in another process.
   */
  timeline(reader: string): Promise<boolean> {
    return this.#refill(this.#timelines, reader, this.#timelineKind)
  }

  /** Seeds an author's recent list (celebrity or own items) from Postgres; true once built. */
  author(author: string): Promise<boolean> {
    return this.#refill(this.#authors, author, this.#authorKind)
  }

  /** Whether a reader's timeline takes fan-out writes: materialised, or being rebuilt. */
  async hasTimeline(reader: string): Promise<boolean> {
    return this.#timelines.has(reader) || (await this.#store.hasList(reader))
  }

  #refill(running: Map<string, Refill>, key: string, kind: Kind): Promise<boolean> {
    const current = running.get(key)
    if (current) return current.done
    const state: Refill = { done: Promise.resolve(false) }
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
        const length = kind.length()
        const rows = await kind.read(key, length + 1)
        // False when a removal or an eviction reached the list meanwhile: the next read rebuilds.
        const items = rows.map(itemFromFeedRow)
        const complete = rows.length <= length
        const ok = await this.#store.materialise(kind.name, key, items, { complete, token })
        rebuilds.inc({ kind: kind.name, outcome: ok ? 'done' : 'restarted' })
        return ok
      } catch (err) {
        rebuilds.inc({ kind: kind.name, outcome: 'failed' })
        if (token !== undefined) {
          await this.#store.abandonRebuild(kind.name, key, token).catch(() => {})
        }
        // The list was not (or not certainly) written: it is still warming, or gone. Either way
        // it is not read until rebuilt, so nothing stale is served; reads pause as after a
        // failed read.
        if (err instanceof TimelineStoreUnavailable) this.#health.readFailed(err)
        else
          this.#failedLog((suppressed) =>
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
  async #awaitOther(kind: Kind, key: string): Promise<boolean> {
    const until = Date.now() + this.#awaitOtherMs
    for (let wait = 5; Date.now() < until; wait = Math.min(wait * 2, 100)) {
      await new Promise((r) => setTimeout(r, wait))
      if (await kind.ready(key)) return true
    }
    return false
  }
}

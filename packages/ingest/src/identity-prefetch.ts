// Identity lookups ahead of the writer. A batch's handle checks (new DIDs, stale handles) are
// network round trips; done in the batch's prepare step they stall the write path. As events are
// decoded, their DIDs are checked here in bulk against the actor rows (one query per round), and
// those the writer will have to verify are resolved now, with bounded concurrency
// (resolve-queue.ts: on the lookup thread when there is one), so the writer's own lookup finds
// the identity caches warm. Nothing here writes: the writer still decides, in order, what each
// event does to an actor.
import type { Kysely } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'
import { childLogger, throttle } from '@openplane/telemetry'
import { needsHandleReindex, readActors } from './actors.ts'
import type { WriterDeps } from './deps.ts'
import { countPrefetched, ResolveQueue, type HandleWarmer } from './resolve-queue.ts'

/** Shared by every prefetcher of the process: they fail together. */
const lookupFailedLog = throttle(10_000)
const log = childLogger('identity-prefetch')

export interface PrefetchOptions {
  /**
   * Lookups running at once (default 256), and DIDs waiting for a slot before new ones are
   * dropped (default 10k): for lookups on this thread; a lookup thread keeps its own defaults.
   */
  concurrency?: number
  maxQueued?: number
  /** DIDs remembered as recently checked (default 200k); older ones may be checked again. */
  remember?: number
}

export class IdentityPrefetch {
  private readonly db: Kysely<DatabaseSchema>
  private readonly warmer: HandleWarmer
  private readonly remember: number
  /** DIDs checked recently; insertion order makes it an LRU. */
  private readonly checked = new Map<string, true>()
  /** DIDs waiting for the next actor query → time of the event that asked. */
  private incoming = new Map<string, string>()
  private scheduled = false
  private querying = false
  private stopped = false

  /** `deps` that warm handles themselves (a lookup thread) are handed the DIDs in bulk. */
  constructor(
    db: Kysely<DatabaseSchema>,
    deps: WriterDeps | (WriterDeps & HandleWarmer),
    opts: PrefetchOptions = {},
  ) {
    this.db = db
    this.warmer =
      'warm' in deps
        ? deps
        : new ResolveQueue((did) => deps.resolveHandle(did, false), countPrefetched, opts)
    this.remember = opts.remember ?? 200_000
  }

  /** An event of `did` at `time` was decoded: make sure its identity will be at hand. */
  see(did: string, time: string): void {
    if (this.stopped || !did || this.checked.has(did) || this.incoming.has(did)) return
    this.incoming.set(did, time)
    if (!this.scheduled) {
      this.scheduled = true
      // One actor query for everything decoded in this turn of the event loop.
      setImmediate(() => void this.round())
    }
  }

  stop(): void {
    this.stopped = true
    this.incoming.clear()
    this.warmer.clearWarming()
  }

  private async round(): Promise<void> {
    this.scheduled = false
    // A round in progress runs again when it ends if more DIDs came meanwhile.
    if (this.querying || !this.incoming.size) return
    const batch = this.incoming
    this.incoming = new Map()
    this.querying = true
    try {
      const rows = await readActors(this.db, [...batch.keys()])
      const actors = new Map(rows.map((r) => [r.did, r]))
      const due: string[] = []
      for (const [did, time] of batch) {
        this.remembered(did)
        if (needsHandleReindex(actors.get(did), time)) due.push(did)
      }
      countPrefetched('fresh', batch.size - due.length)
      if (due.length && !this.stopped) this.warmer.warm(due)
    } catch (err) {
      // Only a head start is lost: the writer resolves what it needs itself. Repeats while
      // Postgres is away: one line per 10 s.
      lookupFailedLog((suppressed) =>
        log.warn({ err: (err as Error).message, suppressed }, 'actor lookup for prefetch failed'),
      )
    } finally {
      this.querying = false
    }
    if (this.incoming.size) void this.round()
  }

  private remembered(did: string): void {
    this.checked.set(did, true)
    if (this.checked.size > this.remember) this.checked.delete(this.checked.keys().next().value!)
  }
}

// Identity lookups ahead of the writer. A batch's handle checks (new DIDs, stale handles) are
// network round trips; done in the batch's prepare step they stall the write path. As events are
// decoded, their DIDs are checked here in bulk against the actor rows (one query per round), and
// those the writer will have to verify are resolved now, with bounded concurrency, so the
// writer's own lookup finds the identity caches warm. Nothing here writes: the writer still
// decides, in order, what each event does to an actor.
import type { Kysely } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'
import { childLogger, counter, throttle } from '@openplane/telemetry'
import { needsHandleReindex, readActors } from './actors.ts'
import type { WriterDeps } from './deps.ts'

/** Shared by every prefetcher of the process: they fail together. */
const lookupFailedLog = throttle(10_000)
const log = childLogger('identity-prefetch')
const prefetched = counter(
  'openplane_identity_prefetch_total',
  'DIDs looked up ahead of the writer, by outcome',
  ['outcome'],
)

export interface PrefetchOptions {
  /** Lookups running at once (default 64). */
  concurrency?: number
  /** DIDs remembered as recently checked (default 200k); older ones may be checked again. */
  remember?: number
  /** DIDs waiting for a lookup slot before new ones are dropped (default 10k). */
  maxQueued?: number
}

export class IdentityPrefetch {
  private readonly db: Kysely<DatabaseSchema>
  private readonly deps: WriterDeps
  private readonly concurrency: number
  private readonly remember: number
  private readonly maxQueued: number
  /** DIDs checked recently; insertion order makes it an LRU. */
  private readonly checked = new Map<string, true>()
  /** DIDs waiting for the next actor query → time of the event that asked. */
  private incoming = new Map<string, string>()
  private readonly resolveQueue: string[] = []
  private inFlight = 0
  private scheduled = false
  private querying = false
  private stopped = false

  constructor(db: Kysely<DatabaseSchema>, deps: WriterDeps, opts: PrefetchOptions = {}) {
    this.db = db
    this.deps = deps
    this.concurrency = opts.concurrency ?? 256
    this.remember = opts.remember ?? 200_000
    this.maxQueued = opts.maxQueued ?? 10_000
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
    this.resolveQueue.length = 0
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
      for (const [did, time] of batch) {
        this.remembered(did)
        if (!needsHandleReindex(actors.get(did), time)) {
          prefetched.inc({ outcome: 'fresh' })
          continue
        }
        if (this.resolveQueue.length >= this.maxQueued) {
          prefetched.inc({ outcome: 'dropped' })
          continue
        }
        this.resolveQueue.push(did)
      }
    } catch (err) {
      // Only a head start is lost: the writer resolves what it needs itself. Repeats while
      // Postgres is away: one line per 10 s.
      lookupFailedLog((suppressed) =>
        log.warn({ err: (err as Error).message, suppressed }, 'actor lookup for prefetch failed'),
      )
    } finally {
      this.querying = false
    }
    this.pump()
    if (this.incoming.size) void this.round()
  }

  private remembered(did: string): void {
    this.checked.set(did, true)
    if (this.checked.size > this.remember) this.checked.delete(this.checked.keys().next().value!)
  }

  private pump(): void {
    while (!this.stopped && this.inFlight < this.concurrency && this.resolveQueue.length) {
      const did = this.resolveQueue.shift()!
      this.inFlight++
      void this.deps
        .resolveHandle(did, false)
        .then(
          () => prefetched.inc({ outcome: 'resolved' }),
          () => prefetched.inc({ outcome: 'failed' }),
        )
        .finally(() => {
          this.inFlight--
          this.pump()
        })
    }
  }
}

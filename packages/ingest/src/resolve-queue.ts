// Handles resolved in the background, ahead of the writer (identity-prefetch.ts decides which):
// a queue of DIDs worked through a bounded number at a time, nobody waiting on an answer. Where
// the lookups run on their own thread (lookup-thread.ts), the queue runs there too, and the
// writer's thread sends it DIDs in bulk: one message a round instead of one per lookup finished
// (over 18,000 new accounts in 100,000 events of a young network, each message a wake-up of the
// other thread).
import { counter } from '@openplane/telemetry'

export type PrefetchOutcome = 'resolved' | 'failed' | 'dropped'

const prefetched = counter(
  'openplane_identity_prefetch_total',
  'DIDs looked up ahead of the writer, by outcome',
  ['outcome'],
)

/** Counts prefetch outcomes on this thread's metrics (a lookup thread reports its own here). */
export function countPrefetched(outcome: PrefetchOutcome | 'fresh', n = 1): void {
  if (n > 0) prefetched.inc({ outcome }, n)
}

/** Where DIDs to resolve ahead of the writer go. */
export interface HandleWarmer {
  /** Resolves these DIDs' handles in the background; no answer (the caches get it). */
  warm(dids: readonly string[]): void
  /** Forgets DIDs not started yet. */
  clearWarming(): void
}

export interface ResolveQueueOptions {
  /** Lookups running at once (default 256). */
  concurrency?: number
  /** DIDs waiting for a lookup slot before new ones are dropped (default 10k). */
  maxQueued?: number
}

export class ResolveQueue implements HandleWarmer {
  private readonly resolve: (did: string) => Promise<unknown>
  private readonly onOutcome: (outcome: PrefetchOutcome) => void
  private readonly concurrency: number
  private readonly maxQueued: number
  private queue: string[] = []
  /**
   * The next DID of `queue` to start. The array is dropped once worked through, and cut when
   * most of it has been (a queue never empty for hours would otherwise keep every DID it held).
   */
  private head = 0
  private inFlight = 0

  constructor(
    resolve: (did: string) => Promise<unknown>,
    onOutcome: (outcome: PrefetchOutcome) => void,
    opts: ResolveQueueOptions = {},
  ) {
    this.resolve = resolve
    this.onOutcome = onOutcome
    this.concurrency = opts.concurrency ?? 256
    this.maxQueued = opts.maxQueued ?? 10_000
  }

  warm(dids: readonly string[]): void {
    for (const did of dids) {
      if (this.queue.length - this.head >= this.maxQueued) this.onOutcome('dropped')
      else {
        this.queue.push(did)
        this.pump()
      }
    }
  }

  clearWarming(): void {
    this.queue = []
    this.head = 0
  }

  private pump(): void {
    while (this.inFlight < this.concurrency && this.head < this.queue.length) {
      const did = this.queue[this.head++]!
      this.inFlight++
      // A resolver that throws instead of rejecting fails its lookup, not the queue.
      new Promise((resolve) => resolve(this.resolve(did)))
        .then(
          () => this.onOutcome('resolved'),
          () => this.onOutcome('failed'),
        )
        .finally(() => {
          this.inFlight--
          this.pump()
        })
    }
    if (this.head === this.queue.length) this.clearWarming()
    else if (this.head >= 1024 && this.head * 2 >= this.queue.length) {
      this.queue = this.queue.slice(this.head)
      this.head = 0
    }
  }

  /** DIDs waiting for a slot, and the length of the array holding them (for tests). */
  get held(): { waiting: number; array: number } {
    return { waiting: this.queue.length - this.head, array: this.queue.length }
  }
}

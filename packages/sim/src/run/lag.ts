// Firehose lag: for a sample of created posts, the time from emission (the sink's post() has
// resolved, so the event is on the firehose) until the post is in a follower's timeline on the
// dataplane. The follower is one in a session if the model knows one, else any follower. Its
// timeline is polled every pollMs; lag is measured to the response that first shows the post, so
// its resolution is the poll interval plus one request.
import { setTimeout as sleep } from 'node:timers/promises'
import type { TimelineTarget } from './client.ts'
import type { Recorder } from './recorder.ts'
import type { PostRef } from './sink.ts'

export interface LagOptions {
  /**
   * A follower of `userId` (whose timeline will show the user's posts), preferably one of
   * `active` (users in a session now), or undefined if the user has none.
   */
  followerOf: (userId: number, active: ReadonlySet<number>) => number | undefined
  /** Probe every Nth created post; default 10. */
  sampleEvery?: number
  /** Wall ms after which a probe gives up (counted as a timeout); default 30 000. */
  timeoutMs?: number
  /** Wall ms between polls; default 100. */
  pollMs?: number
  /** Probes at once; a post sampled while at the limit is not probed. Default 32. */
  maxProbes?: number
  /** Timeline page size of a poll; default 30. */
  limit?: number
}

export class LagProbes {
  private readonly opts: Required<LagOptions>
  private readonly target: TimelineTarget
  private readonly rec: Recorder
  private readonly active: ReadonlySet<number>
  private readonly probes = new Set<Promise<void>>()
  private readonly abort = new AbortController()
  private posts = 0

  constructor(
    opts: LagOptions,
    target: TimelineTarget,
    rec: Recorder,
    active: ReadonlySet<number>,
  ) {
    this.opts = {
      sampleEvery: 10,
      timeoutMs: 30_000,
      pollMs: 100,
      maxProbes: 32,
      limit: 30,
      ...opts,
    }
    this.target = target
    this.rec = rec
    this.active = active
  }

  /** A post of `userId` was emitted at `emittedAt` (performance.now()). */
  created(userId: number, ref: PostRef | void, emittedAt: number): void {
    if (this.posts++ % this.opts.sampleEvery !== 0) return
    if (!ref?.uri || this.abort.signal.aborted || this.probes.size >= this.opts.maxProbes) return
    const follower = this.opts.followerOf(userId, this.active)
    if (follower === undefined) return
    const probe = this.probe(follower, ref.uri, emittedAt).finally(() => this.probes.delete(probe))
    this.probes.add(probe)
  }

  /** Waits for the running probes (each ends by its timeout at the latest). */
  async drain(): Promise<void> {
    while (this.probes.size > 0) await Promise.allSettled([...this.probes])
  }

  /** Abandons the running probes (not counted as timeouts). */
  stop(): void {
    this.abort.abort()
  }

  private async probe(follower: number, uri: string, emittedAt: number): Promise<void> {
    const { timeoutMs, pollMs, limit } = this.opts
    const signal = this.abort.signal
    const deadline = emittedAt + timeoutMs
    while (!signal.aborted) {
      const sent = performance.now()
      try {
        const uris = await this.target.getTimeline(follower, limit, Math.max(1, deadline - sent))
        if (uris.includes(uri)) {
          this.rec.lag(performance.now() - emittedAt)
          return
        }
      } catch {
        // A failed poll is retried until the deadline.
      }
      const wait = Math.min(pollMs, deadline - performance.now())
      if (wait <= 0) break
      await sleep(wait, undefined, { signal }).catch(() => undefined)
    }
    if (!signal.aborted) this.rec.lagTimeout()
  }
}

// User sessions: from its start, a session requests its user's timeline from every target at a
// fixed interval for its whole duration (both in plan time, so scaled by the run's speed). A tick
// whose previous request to a target is still in flight is skipped (counted, not queued); a tick
// that fires later than the threshold is counted late; ticks missed entirely (the generator was
// stalled for more than an interval) are counted skipped.
import type { TimelineTarget } from './client.ts'
import type { Recorder } from './recorder.ts'

export interface SessionsOptions {
  targets: TimelineTarget[]
  rec: Recorder
  speed: number
  /** Plan ms between two requests of a session. */
  intervalMs: number
  limit: number
  /** Wall ms a request may take before it counts as an error. */
  timeoutMs: number
  /** Wall ms after which a tick counts as late. */
  lateMs: number
}

export class Sessions {
  /** Users with at least one active session. */
  readonly activeUsers = new Set<number>()
  private readonly perUser = new Map<number, number>()
  private readonly live = new Set<Session>()
  private readonly pending = new Set<Promise<void>>()
  readonly options: SessionsOptions
  private stopped = false

  constructor(opts: SessionsOptions) {
    this.options = opts
  }

  get active(): number {
    return this.live.size
  }

  /** Starts a session of `userId` scheduled (wall ms since run start) at `dueWall`. */
  start(userId: number, durationMs: number, dueWall: number): void {
    if (this.stopped) return
    const { speed, intervalMs } = this.options
    const session = new Session(
      this,
      userId,
      dueWall,
      dueWall + durationMs / speed,
      Math.max(1, intervalMs / speed),
    )
    this.live.add(session)
    this.perUser.set(userId, (this.perUser.get(userId) ?? 0) + 1)
    this.activeUsers.add(userId)
    this.options.rec.sessionStarted()
    session.tick()
  }

  /** Ends every session now; in-flight requests finish (see drain). */
  stopAll(): void {
    this.stopped = true
    for (const s of [...this.live]) s.end()
  }

  /** Resolves when no request is in flight. */
  async drain(): Promise<void> {
    while (this.pending.size > 0) await Promise.allSettled([...this.pending])
  }

  /** @internal */
  ended(session: Session): void {
    if (!this.live.delete(session)) return
    const left = (this.perUser.get(session.userId) ?? 1) - 1
    if (left > 0) this.perUser.set(session.userId, left)
    else {
      this.perUser.delete(session.userId)
      this.activeUsers.delete(session.userId)
    }
    this.options.rec.sessionEnded()
  }

  /** @internal Sends one request; `done` runs when it has finished either way. */
  request(userId: number, target: TimelineTarget, done: () => void): void {
    const { rec, limit, timeoutMs } = this.options
    const t0 = performance.now()
    const p = target.getTimeline(userId, limit, timeoutMs).then(
      () => rec.request(target.name, performance.now() - t0, true),
      (err: unknown) => {
        rec.request(target.name, performance.now() - t0, false)
        rec.error(`${target.name}: ${err instanceof Error ? err.message : String(err)}`)
      },
    )
    const tracked = p.finally(() => {
      this.pending.delete(tracked)
      done()
    })
    this.pending.add(tracked)
  }
}

class Session {
  readonly userId: number
  private readonly owner: Sessions
  private readonly startWall: number
  private readonly endWall: number
  private readonly interval: number
  private readonly inFlight: boolean[]
  private k = 0
  private timer: NodeJS.Timeout | undefined
  private over = false

  constructor(
    owner: Sessions,
    userId: number,
    startWall: number,
    endWall: number,
    interval: number,
  ) {
    this.owner = owner
    this.userId = userId
    this.startWall = startWall
    this.endWall = endWall
    this.interval = interval
    this.inFlight = owner.options.targets.map(() => false)
  }

  tick(): void {
    this.timer = undefined
    if (this.over) return
    const { rec, targets, lateMs } = this.owner.options
    const now = rec.elapsed()
    const last = Math.min(now, this.endWall)
    // The latest tick due by now; earlier ones not fired yet were missed.
    const due = Math.max(this.k, Math.floor((last - this.startWall) / this.interval))
    const scheduled = this.startWall + due * this.interval
    if (scheduled >= this.endWall) return this.end()
    targets.forEach((target, i) => {
      if (due > this.k) rec.requestSkipped(target.name, due - this.k)
      if (now - scheduled > lateMs) rec.requestLate(target.name)
      if (this.inFlight[i]) {
        rec.requestSkipped(target.name)
        return
      }
      this.inFlight[i] = true
      this.owner.request(this.userId, target, () => {
        this.inFlight[i] = false
      })
    })
    this.k = due + 1
    const next = this.startWall + this.k * this.interval
    if (next >= this.endWall) this.timer = setTimeout(() => this.end(), this.endWall - now)
    else this.timer = setTimeout(() => this.tick(), next - now)
  }

  end(): void {
    if (this.over) return
    this.over = true
    if (this.timer) clearTimeout(this.timer)
    this.owner.ended(this)
  }
}

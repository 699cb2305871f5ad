// Measurements of one run, twice: Prometheus metrics for live dashboards, and per-window counts
// and histograms in memory for the report. Windows are merged pairwise (doubling their width)
// when there are too many, so memory stays bounded however long the run.
import { monitorEventLoopDelay, type ELDHistogram } from 'node:perf_hooks'
import type { EventCounts, TargetWindow, WindowData } from './data.ts'
import { LogHistogram } from './histogram.ts'
import { createSimMetrics, type SimMetrics } from './metrics.ts'

export type EventKind = 'post' | 'follow'
export type EventStage = 'dispatched' | 'created' | 'failed' | 'dropped'

interface LiveTarget {
  ok: number
  errors: number
  skipped: number
  late: number
  latency: LogHistogram
}

interface LiveWindow {
  t: number
  targets: Map<string, LiveTarget>
  posts: EventCounts
  follows: EventCounts
  sessionsStarted: number
  sessionsLate: number
  activeSessions: number
  lag: LogHistogram
  lagTimeouts: number
  cpuUserUs: number
  cpuSystemUs: number
  loopDelayMs: number
}

const MAX_ERROR_KINDS = 20

const counts = (): EventCounts => ({ dispatched: 0, created: 0, failed: 0, dropped: 0, late: 0 })

function addCounts(a: EventCounts, b: EventCounts): void {
  a.dispatched += b.dispatched
  a.created += b.created
  a.failed += b.failed
  a.dropped += b.dropped
  a.late += b.late
}

export interface RecorderOptions {
  label: string
  windowMs?: number
  /** Merge windows pairwise beyond this many. */
  maxWindows?: number
  /** Wall clock in ms (monotonic); the run's t = 0 is the first call. */
  clock?: () => number
}

export class Recorder {
  readonly metrics: SimMetrics
  /** Distinct error messages (requests, sink calls) with counts; at most MAX_ERROR_KINDS. */
  readonly errors = new Map<string, number>()
  windowMs: number
  private readonly maxWindows: number
  private readonly clock: () => number
  private t0 = 0
  private windows: LiveWindow[] = []
  private active = 0
  private cpu = process.cpuUsage()
  private sampledAt = 0
  private loop: ELDHistogram | undefined
  private sampler: NodeJS.Timeout | undefined

  constructor(opts: RecorderOptions) {
    this.metrics = createSimMetrics(opts.label)
    this.windowMs = opts.windowMs ?? 1000
    this.maxWindows = opts.maxWindows ?? 1800
    this.clock = opts.clock ?? (() => performance.now())
  }

  /** Starts the clock and the CPU / event-loop sampler (one sample per window). */
  start(): void {
    this.t0 = this.clock()
    this.cpu = process.cpuUsage()
    this.sampledAt = this.t0
    this.loop = monitorEventLoopDelay({ resolution: 10 })
    this.loop.enable()
    this.current()
    this.sampler = setInterval(() => this.sample(), this.windowMs)
    this.sampler.unref()
  }

  /** Final sample; returns the windows as saved in run.json. */
  stop(): WindowData[] {
    if (this.sampler) clearInterval(this.sampler)
    this.sampler = undefined
    this.sample()
    this.loop?.disable()
    return this.windows.map(toData)
  }

  /** Wall ms since start. */
  elapsed(): number {
    return this.clock() - this.t0
  }

  request(target: string, ms: number, ok: boolean): void {
    const t = this.target(target)
    const outcome = ok ? 'ok' : 'error'
    if (ok) {
      t.ok++
      t.latency.record(ms)
    } else {
      t.errors++
    }
    this.metrics.requests.inc({ target, outcome })
    this.metrics.requestSeconds.observe({ target, outcome }, ms / 1000)
  }

  requestSkipped(target: string, n = 1): void {
    this.target(target).skipped += n
    this.metrics.requests.inc({ target, outcome: 'skipped' }, n)
  }

  requestLate(target: string): void {
    this.target(target).late++
    this.metrics.requestsLate.inc({ target })
  }

  event(kind: EventKind, stage: EventStage): void {
    const w = this.current()
    ;(kind === 'post' ? w.posts : w.follows)[stage]++
    this.metrics.events.inc({ kind, stage })
  }

  eventLate(kind: EventKind | 'session'): void {
    const w = this.current()
    if (kind === 'session') w.sessionsLate++
    else (kind === 'post' ? w.posts : w.follows).late++
    this.metrics.eventsLate.inc({ kind })
  }

  sinkInFlight(n: number): void {
    this.metrics.sinkInFlight.set(n)
  }

  sessionStarted(): void {
    this.current().sessionsStarted++
    this.metrics.sessionsStarted.inc()
    this.setActive(this.active + 1)
  }

  sessionEnded(): void {
    this.setActive(this.active - 1)
  }

  error(message: string): void {
    if (this.errors.has(message) || this.errors.size < MAX_ERROR_KINDS) {
      this.errors.set(message, (this.errors.get(message) ?? 0) + 1)
    }
  }

  lag(ms: number): void {
    this.current().lag.record(ms)
    this.metrics.lagSeconds.observe(ms / 1000)
  }

  lagTimeout(): void {
    this.current().lagTimeouts++
    this.metrics.lagTimeouts.inc()
  }

  private setActive(n: number): void {
    this.active = n
    const w = this.current()
    w.activeSessions = Math.max(w.activeSessions, n)
    this.metrics.activeSessions.set(n)
  }

  private target(name: string): LiveTarget {
    const w = this.current()
    let t = w.targets.get(name)
    if (!t) {
      t = { ok: 0, errors: 0, skipped: 0, late: 0, latency: new LogHistogram() }
      w.targets.set(name, t)
    }
    return t
  }

  /** The window of now (or of `t`), creating it and any before it as needed. */
  private current(t = this.elapsed()): LiveWindow {
    const index = Math.max(0, Math.floor(t / this.windowMs))
    while (this.windows.length <= index) {
      this.windows.push(emptyWindow(this.windows.length * this.windowMs, this.active))
    }
    if (this.windows.length > this.maxWindows) {
      this.compact()
      return this.current(t)
    }
    return this.windows[index]!
  }

  private compact(): void {
    const merged: LiveWindow[] = []
    for (let i = 0; i < this.windows.length; i += 2) {
      const a = this.windows[i]!
      const b = this.windows[i + 1]
      if (b) mergeWindow(a, b)
      merged.push(a)
    }
    this.windows = merged
    this.windowMs *= 2
  }

  /**
   * CPU and event-loop delay since the last sample, shared out over the windows the interval
   * overlaps (a stalled event loop delays the sampler past window boundaries).
   */
  private sample(): void {
    const now = this.clock()
    const from = Math.max(0, this.sampledAt - this.t0)
    const to = now - this.t0
    this.current(to)
    const cpu = process.cpuUsage(this.cpu)
    this.cpu = process.cpuUsage()
    this.metrics.cpuSeconds.inc({ mode: 'user' }, cpu.user / 1e6)
    this.metrics.cpuSeconds.inc({ mode: 'system' }, cpu.system / 1e6)
    this.metrics.cpuRatio.set((cpu.user + cpu.system) / Math.max(1, (to - from) * 1000))
    this.sampledAt = now
    let p99 = 0
    if (this.loop) {
      p99 = this.loop.count > 0 ? this.loop.percentile(99) / 1e6 : 0
      this.metrics.loopDelay.set(p99 / 1000)
      this.loop.reset()
    }
    const W = this.windowMs
    const first = Math.min(this.windows.length - 1, Math.floor(from / W))
    const last = Math.min(this.windows.length - 1, Math.floor(to / W))
    for (let i = first; i <= last; i++) {
      const w = this.windows[i]!
      const share =
        to - from > 0 ? (Math.min(to, (i + 1) * W) - Math.max(from, i * W)) / (to - from) : 1
      w.cpuUserUs += cpu.user * share
      w.cpuSystemUs += cpu.system * share
      w.loopDelayMs = Math.max(w.loopDelayMs, Math.round(p99 * 100) / 100)
    }
  }
}

function emptyWindow(t: number, active: number): LiveWindow {
  return {
    t,
    targets: new Map(),
    posts: counts(),
    follows: counts(),
    sessionsStarted: 0,
    sessionsLate: 0,
    activeSessions: active,
    lag: new LogHistogram(),
    lagTimeouts: 0,
    cpuUserUs: 0,
    cpuSystemUs: 0,
    loopDelayMs: 0,
  }
}

function mergeWindow(a: LiveWindow, b: LiveWindow): void {
  for (const [name, tb] of b.targets) {
    const ta = a.targets.get(name)
    if (!ta) {
      a.targets.set(name, tb)
      continue
    }
    ta.ok += tb.ok
    ta.errors += tb.errors
    ta.skipped += tb.skipped
    ta.late += tb.late
    ta.latency.merge(tb.latency)
  }
  addCounts(a.posts, b.posts)
  addCounts(a.follows, b.follows)
  a.sessionsStarted += b.sessionsStarted
  a.sessionsLate += b.sessionsLate
  a.activeSessions = Math.max(a.activeSessions, b.activeSessions)
  a.lag.merge(b.lag)
  a.lagTimeouts += b.lagTimeouts
  a.cpuUserUs += b.cpuUserUs
  a.cpuSystemUs += b.cpuSystemUs
  a.loopDelayMs = Math.max(a.loopDelayMs, b.loopDelayMs)
}

function toData(w: LiveWindow): WindowData {
  const targets: Record<string, TargetWindow> = {}
  for (const [name, t] of w.targets) {
    targets[name] = {
      ok: t.ok,
      errors: t.errors,
      skipped: t.skipped,
      late: t.late,
      latency: t.latency.toJSON(),
    }
  }
  return {
    t_ms: w.t,
    targets,
    posts: { ...w.posts },
    follows: { ...w.follows },
    sessions_started: w.sessionsStarted,
    sessions_late: w.sessionsLate,
    active_sessions: w.activeSessions,
    lag: w.lag.toJSON(),
    lag_timeouts: w.lagTimeouts,
    cpu_user_us: Math.round(w.cpuUserUs),
    cpu_system_us: Math.round(w.cpuSystemUs),
    loop_delay_ms: w.loopDelayMs,
  }
}

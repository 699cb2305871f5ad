// Run summaries from the per-window data: totals, latency percentiles of the merged window
// histograms, rates, generator CPU; and the summary table (one run, or two side by side with
// ratios) as rows shared by the HTML report and the terminal.
import type { EventCounts, RunData, WindowData } from '../run/data.ts'
import { LogHistogram } from '../run/histogram.ts'

export interface TargetSummary {
  requests: number
  ok: number
  errors: number
  skipped: number
  late: number
  /** Successful requests per second over the run. */
  throughput: number
  /** Highest per-window rate of successful requests. */
  peakThroughput: number
  p50?: number
  p95?: number
  p99?: number
  max?: number
  mean?: number
}

export interface RunSummary {
  label: string
  durationS: number
  planEntries: number
  joinedEntries: number
  targets: Record<string, TargetSummary>
  sessionsStarted: number
  sessionsLate: number
  maxActiveSessions: number
  posts: EventCounts
  follows: EventCounts
  lag: {
    samples: number
    timeouts: number
    p50?: number
    p95?: number
    p99?: number
    max?: number
  }
  cpuAvgPct: number
  cpuMaxPct: number
  cpuSeconds: number
  loopDelayMaxMs: number
}

const sumCounts = (ws: WindowData[], pick: (w: WindowData) => EventCounts): EventCounts => {
  const c: EventCounts = { dispatched: 0, created: 0, failed: 0, dropped: 0, late: 0 }
  for (const w of ws) {
    const x = pick(w)
    c.dispatched += x.dispatched
    c.created += x.created
    c.failed += x.failed
    c.dropped += x.dropped
    c.late += x.late
  }
  return c
}

/** Seconds of wall time a window covers (the last one only up to where measuring stopped). */
export function windowSeconds(data: RunData, w: WindowData): number {
  const end = data.recorded_ms ?? data.duration_ms
  return Math.max(0.001, Math.min(data.window_ms, end - w.t_ms) / 1000)
}

/** Windows of at least half the width: rates over shorter ones are too noisy to show. */
export function isFull(data: RunData, w: WindowData): boolean {
  return windowSeconds(data, w) * 1000 >= data.window_ms / 2
}

export function summarize(data: RunData): RunSummary {
  const ws = data.windows
  const durationS = Math.max(0.001, data.duration_ms / 1000)
  const names = new Set(ws.flatMap((w) => Object.keys(w.targets)))
  const targets: Record<string, TargetSummary> = {}
  for (const name of [...names].sort()) {
    const latency = new LogHistogram()
    const t: TargetSummary = {
      requests: 0,
      ok: 0,
      errors: 0,
      skipped: 0,
      late: 0,
      throughput: 0,
      peakThroughput: 0,
    }
    for (const w of ws) {
      const x = w.targets[name]
      if (!x) continue
      t.ok += x.ok
      t.errors += x.errors
      t.skipped += x.skipped
      t.late += x.late
      latency.merge(LogHistogram.fromJSON(x.latency))
      if (isFull(data, w)) {
        t.peakThroughput = Math.max(t.peakThroughput, x.ok / windowSeconds(data, w))
      }
    }
    t.requests = t.ok + t.errors
    t.throughput = t.ok / durationS
    t.p50 = latency.quantile(0.5)
    t.p95 = latency.quantile(0.95)
    t.p99 = latency.quantile(0.99)
    t.max = latency.quantile(1)
    t.mean = latency.mean()
    targets[name] = t
  }
  const lag = new LogHistogram()
  let lagTimeouts = 0
  let cpuUs = 0
  let cpuMax = 0
  let loopMax = 0
  let maxActive = 0
  let sessionsStarted = 0
  let sessionsLate = 0
  for (const w of ws) {
    lag.merge(LogHistogram.fromJSON(w.lag))
    lagTimeouts += w.lag_timeouts
    const us = w.cpu_user_us + w.cpu_system_us
    cpuUs += us
    if (isFull(data, w)) cpuMax = Math.max(cpuMax, us / 10 / (windowSeconds(data, w) * 1000))
    loopMax = Math.max(loopMax, w.loop_delay_ms)
    maxActive = Math.max(maxActive, w.active_sessions)
    sessionsStarted += w.sessions_started
    sessionsLate += w.sessions_late
  }
  const covered = ws.reduce((s, w) => s + windowSeconds(data, w), 0)
  return {
    label: data.label,
    durationS,
    planEntries: data.plan.length,
    joinedEntries: data.plan.filter((e) => e.joined).length,
    targets,
    sessionsStarted,
    sessionsLate,
    maxActiveSessions: maxActive,
    posts: sumCounts(ws, (w) => w.posts),
    follows: sumCounts(ws, (w) => w.follows),
    lag: {
      samples: lag.count,
      timeouts: lagTimeouts,
      p50: lag.quantile(0.5),
      p95: lag.quantile(0.95),
      p99: lag.quantile(0.99),
      max: lag.quantile(1),
    },
    cpuAvgPct: covered > 0 ? cpuUs / 10 / (covered * 1000) : 0,
    cpuMaxPct: cpuMax,
    cpuSeconds: cpuUs / 1e6,
    loopDelayMaxMs: loopMax,
  }
}

export type Better = 'lower' | 'higher'

export interface SummaryRow {
  section: string
  label: string
  values: (number | undefined)[]
  format: (v: number) => string
  /** Which direction is an improvement; rows without it get no ratio colouring. */
  better?: Better
}

export const fmtInt = (v: number): string => Math.round(v).toLocaleString('en-US')
export const fmtMs = (v: number): string =>
  v >= 1000 ? `${(v / 1000).toFixed(2)} s` : v >= 10 ? `${v.toFixed(1)} ms` : `${v.toFixed(2)} ms`
export const fmtRate = (v: number): string => `${v >= 100 ? v.toFixed(0) : v.toFixed(1)}/s`
export const fmtPct = (v: number): string => `${v.toFixed(1)} %`
export const fmtS = (v: number): string => `${v.toFixed(1)} s`

/** The summary table: one value column per run. */
export function summaryRows(runs: RunSummary[]): SummaryRow[] {
  const rows: SummaryRow[] = []
  const add = (
    section: string,
    label: string,
    get: (s: RunSummary) => number | undefined,
    format: (v: number) => string,
    better?: Better,
  ): void => {
    rows.push({ section, label, values: runs.map(get), format, ...(better ? { better } : {}) })
  }
  add('Run', 'duration', (s) => s.durationS, fmtS)
  add('Run', 'plan entries', (s) => s.planEntries, fmtInt)
  add('Run', 'joined interactively', (s) => s.joinedEntries, fmtInt)
  const names = [...new Set(runs.flatMap((s) => Object.keys(s.targets)))]
  for (const name of names) {
    const section = name === 'dataplane' ? 'GetTimeline (dataplane)' : `getTimeline (${name})`
    const t = (s: RunSummary): TargetSummary | undefined => s.targets[name]
    add(section, 'requests', (s) => t(s)?.requests, fmtInt)
    add(section, 'errors', (s) => t(s)?.errors, fmtInt, 'lower')
    add(section, 'throughput (ok)', (s) => t(s)?.throughput, fmtRate, 'higher')
    add(section, 'peak throughput', (s) => t(s)?.peakThroughput, fmtRate, 'higher')
    add(section, 'latency p50', (s) => t(s)?.p50, fmtMs, 'lower')
    add(section, 'latency p95', (s) => t(s)?.p95, fmtMs, 'lower')
    add(section, 'latency p99', (s) => t(s)?.p99, fmtMs, 'lower')
    add(section, 'latency max', (s) => t(s)?.max, fmtMs, 'lower')
    add(section, 'dropped ticks (in flight)', (s) => t(s)?.skipped, fmtInt, 'lower')
    add(section, 'late ticks', (s) => t(s)?.late, fmtInt, 'lower')
  }
  add('Sessions', 'started', (s) => s.sessionsStarted, fmtInt)
  add('Sessions', 'most active at once', (s) => s.maxActiveSessions, fmtInt)
  add('Sessions', 'started late', (s) => s.sessionsLate, fmtInt, 'lower')
  for (const [section, pick] of [
    ['Posts', (s: RunSummary) => s.posts],
    ['Follows', (s: RunSummary) => s.follows],
  ] as const) {
    add(section, 'dispatched', (s) => pick(s).dispatched, fmtInt)
    add(section, 'created', (s) => pick(s).created, fmtInt)
    add(section, 'failed', (s) => pick(s).failed, fmtInt, 'lower')
    add(section, 'dropped (backpressure)', (s) => pick(s).dropped, fmtInt, 'lower')
    add(section, 'late', (s) => pick(s).late, fmtInt, 'lower')
  }
  add('Firehose lag', 'samples', (s) => s.lag.samples, fmtInt)
  add('Firehose lag', 'p50', (s) => s.lag.p50, fmtMs, 'lower')
  add('Firehose lag', 'p95', (s) => s.lag.p95, fmtMs, 'lower')
  add('Firehose lag', 'p99', (s) => s.lag.p99, fmtMs, 'lower')
  add('Firehose lag', 'max', (s) => s.lag.max, fmtMs, 'lower')
  add('Firehose lag', 'timeouts', (s) => s.lag.timeouts, fmtInt, 'lower')
  add('Generator', 'CPU average (100 % = 1 core)', (s) => s.cpuAvgPct, fmtPct)
  add('Generator', 'CPU peak window', (s) => s.cpuMaxPct, fmtPct)
  add('Generator', 'CPU time', (s) => s.cpuSeconds, fmtS)
  add('Generator', 'event loop p99 (worst window)', (s) => s.loopDelayMaxMs, fmtMs)
  return rows
}

/** b / a, or undefined where it means nothing. */
export function ratio(a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined || b === undefined) return undefined
  if (a === 0) return b === 0 ? 1 : undefined
  return b / a
}

export const fmtRatio = (r: number): string =>
  r >= 100 ? `${r.toFixed(0)}×` : r >= 10 ? `${r.toFixed(1)}×` : `${r.toFixed(2)}×`

/** The summary table as aligned text, with a ratio column (second / first) for two runs. */
export function formatSummaryTable(runs: RunSummary[]): string {
  const rows = summaryRows(runs)
  const header = ['', ...runs.map((r) => r.label), ...(runs.length === 2 ? ['ratio'] : [])]
  const lines: string[][] = [header]
  let section = ''
  for (const row of rows) {
    if (row.section !== section) {
      section = row.section
      lines.push([`${section}`])
    }
    const cells = row.values.map((v) => (v === undefined ? '-' : row.format(v)))
    if (runs.length === 2) {
      const r = ratio(row.values[0], row.values[1])
      cells.push(r === undefined ? '-' : fmtRatio(r))
    }
    lines.push([`  ${row.label}`, ...cells])
  }
  const widths = header.map((_, i) => Math.max(...lines.map((l) => l[i]?.length ?? 0)))
  return lines
    .map((l) =>
      l.length === 1
        ? l[0]!
        : l.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  '),
    )
    .join('\n')
}

// Synthetic run data with the shape of a real run (sessions ramping up, a scenario joining, a
// latency bump under load): for previewing report layouts and for tests. Deterministic per seed.
import type { EventCounts, RunData, WindowData } from '../run/data.ts'
import { LogHistogram } from '../run/histogram.ts'
import { Rng } from '../rng.ts'

export interface DemoOptions {
  label: string
  seed?: number
  /** Seconds of run (one window per second). */
  seconds?: number
  /** Median latency at rest (ms). */
  baseMs?: number
  /** How much latency grows with load (ms per 100 req/s). */
  loadMs?: number
  /** Peak successful requests per second. */
  peakRps?: number
  /** Share of requests that fail. */
  errorRate?: number
}

const counts = (dispatched: number, dropped = 0, late = 0): EventCounts => ({
  dispatched,
  created: dispatched,
  failed: 0,
  dropped,
  late,
})

export function demoRunData(opts: DemoOptions): RunData {
  const rng = new Rng(opts.seed ?? 1)
  const seconds = opts.seconds ?? 120
  const base = opts.baseMs ?? 2
  const loadMs = opts.loadMs ?? 1
  const peak = opts.peakRps ?? 800
  const errorRate = opts.errorRate ?? 0
  const joinAt = Math.floor(seconds * 0.55)
  const windows: WindowData[] = []
  for (let s = 0; s < seconds; s++) {
    // Sessions ramp up over the first third, the joined scenario adds a burst.
    const ramp = Math.min(1, s / (seconds / 3))
    const burst = s >= joinAt && s < joinAt + seconds / 6 ? 0.35 : 0
    const rps = Math.round(peak * (ramp * 0.8 + burst) * (0.95 + 0.1 * rng.float()))
    const latency = new LogHistogram()
    const median = base + (loadMs * rps) / 100
    for (let i = 0; i < Math.min(rps, 400); i++) {
      // Log-normal around the median, with a heavier tail under load.
      const sigma = 0.35 + 0.25 * burst
      latency.record(median * Math.exp(sigma * rng.normal()))
    }
    const errors = Math.round(rps * errorRate)
    const posts = Math.round(20 * ramp + (burst ? 120 : 0) + 4 * rng.float())
    windows.push({
      t_ms: s * 1000,
      targets: {
        dataplane: {
          ok: rps - errors,
          errors,
          skipped: burst ? Math.round(rps * 0.01) : 0,
          late: burst ? Math.round(rps * 0.002) : 0,
          latency: latency.toJSON(),
        },
      },
      posts: counts(posts, burst && s % 7 === 0 ? 3 : 0),
      follows: counts(Math.round(5 * ramp + rng.float() * 2)),
      sessions_started: s < seconds / 3 ? 30 : burst ? 12 : 2,
      sessions_late: 0,
      active_sessions: Math.round(8000 * ramp + 3500 * (burst ? 1 : 0)),
      lag: lagWindow(rng, s % 3 === 0 ? 4 : 0, 40 + 300 * burst + 5 * rng.float()),
      lag_timeouts: 0,
      cpu_user_us: Math.round((150_000 + rps * 300) * (0.9 + 0.2 * rng.float())),
      cpu_system_us: Math.round((40_000 + rps * 60) * (0.9 + 0.2 * rng.float())),
      loop_delay_ms: Math.round((10 + 20 * burst + rng.float() * 2) * 100) / 100,
    })
  }
  return {
    version: 1,
    label: opts.label,
    dataplane_url: 'http://127.0.0.1:2585',
    started_at: '2026-01-01T12:00:00.000Z',
    duration_ms: seconds * 1000,
    recorded_ms: seconds * 1000,
    end_offset_ms: seconds * 10_000,
    stopped_by: 'end',
    settings: {
      speed: 10,
      session_interval_ms: 10_000,
      timeline_limit: 50,
      late_ms: 50,
      max_in_flight: 1000,
      request_timeout_ms: 10_000,
      http_version: '2',
      lag_sample_every: 10,
    },
    plan: [
      {
        scenario_name: 'saturday morning',
        path: 'saturday-morning.json',
        offset_ms: 0,
        joined: false,
      },
      {
        scenario_name: 'shitstorm',
        path: 'shitstorm.json',
        offset_ms: joinAt * 10_000,
        joined: true,
      },
    ],
    errors:
      errorRate > 0 ? [{ message: 'dataplane: [deadline_exceeded] timed out', count: 12 }] : [],
    window_ms: 1000,
    windows,
  }
}

function lagWindow(rng: Rng, n: number, medianMs: number) {
  const h = new LogHistogram()
  for (let i = 0; i < n; i++) h.record(medianMs * Math.exp(0.3 * rng.normal()))
  return h.toJSON()
}

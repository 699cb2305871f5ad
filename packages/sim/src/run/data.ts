// What a run keeps about itself: settings, the effective plan and per-window measurements. Saved
// as run.json in the run directory; reports are rendered from it (also later, by `report`).
import { readFile } from 'node:fs/promises'
import path from 'node:path'
import type { PlanEntry } from '../params.ts'
import { Fields, ParamError, parseJson } from '../validate.ts'
import type { HistogramJson } from './histogram.ts'

export const RUN_DATA_FILE = 'run.json'
export const PLAN_FILE = 'plan.json'
export const REPORT_FILE = 'report.html'

export interface RunSettings {
  speed: number
  /** Plan time the run stops at, if bounded. */
  max_duration_ms?: number
  session_interval_ms: number
  timeline_limit: number
  late_ms: number
  max_in_flight: number
  request_timeout_ms: number
  http_version?: '1.1' | '2'
  lag_sample_every?: number
}

export interface EffectivePlanEntry extends PlanEntry {
  /** Added through the control endpoint while running. */
  joined: boolean
}

export interface EventCounts {
  dispatched: number
  created: number
  failed: number
  dropped: number
  late: number
}

export interface TargetWindow {
  ok: number
  errors: number
  skipped: number
  late: number
  /** Latency of successful requests (ms). */
  latency: HistogramJson
}

export interface WindowData {
  /** Window start, wall ms since the run started. */
  t_ms: number
  targets: Record<string, TargetWindow>
  posts: EventCounts
  follows: EventCounts
  sessions_started: number
  sessions_late: number
  /** Most sessions active at once during the window. */
  active_sessions: number
  /** Firehose lag of sampled posts detected in this window (ms). */
  lag: HistogramJson
  lag_timeouts: number
  cpu_user_us: number
  cpu_system_us: number
  /** p99 event loop delay of the generator in the window (ms). */
  loop_delay_ms: number
}

export type StopReason = 'end' | 'duration' | 'stop'

export interface RunData {
  version: 1
  label: string
  dataplane_url?: string
  appview_url?: string
  started_at: string
  /** Wall time of the run: start until the last event was dispatched. */
  duration_ms: number
  /** Wall time until measurements stopped: the run plus draining in-flight work. */
  recorded_ms: number
  /** Plan time the run reached (every event at or before it was dispatched). */
  end_offset_ms: number
  stopped_by: StopReason
  settings: RunSettings
  plan: EffectivePlanEntry[]
  /** Distinct error messages of requests and sink calls, with counts. */
  errors: { message: string; count: number }[]
  /** Width of every window (grows by doubling on long runs to bound memory). */
  window_ms: number
  windows: WindowData[]
}

export async function readRunData(dirOrFile: string): Promise<RunData> {
  const file = dirOrFile.endsWith('.json') ? dirOrFile : path.join(dirOrFile, RUN_DATA_FILE)
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (err) {
    throw new ParamError(`${file}: cannot read (${(err as NodeJS.ErrnoException).code ?? err})`)
  }
  const value = parseJson(text, file)
  const f = new Fields(file, value)
  if (f.raw('version') !== 1) throw new ParamError(`${file}.version must be 1 (a run.json file)`)
  f.string('label')
  f.array('windows', false)
  f.array('plan')
  return value as RunData
}

// The plan runner: dispatches a simulation plan's events at their times (plan offset + event
// offset, divided by the speed-up), posts and follows to an EventSink, sessions to the timeline
// targets; takes scenarios joined through the control endpoint at the current runtime offset;
// exports the effective plan to the run directory on every change and at the end; measures
// everything (Recorder) and writes run.json and report.html when done. Long because startRun is
// one closure: dispatch, joined scenarios, the export and the drain share the run's clock, its
// plan and its stop, which a split would pass around as a bag of mutable state.
import { mkdir, rename, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { readPlan, readScenario } from '../files.ts'
import type { PlanEntry } from '../params.ts'
import type { ProgressFn } from '../progress.ts'
import { renderReport } from '../report/html.ts'
import { ParamError } from '../validate.ts'
import {
  appviewTarget,
  dataplaneClient,
  dataplaneTarget,
  detectHttpVersion,
  type AppviewOptions,
  type HttpVersion,
  type TimelineTarget,
} from './client.ts'
import { ConflictError, startControlServer, type ControlServer } from './control.ts'
import {
  PLAN_FILE,
  readRunData,
  REPORT_FILE,
  RUN_DATA_FILE,
  type EffectivePlanEntry,
  type RunData,
  type RunSettings,
  type StopReason,
} from './data.ts'
import { EventQueue, sortScenario, type PlanEvent, type SortedScenario } from './events.ts'
import { LagProbes, type LagOptions } from './lag.ts'
import { Recorder } from './recorder.ts'
import { Sessions } from './sessions.ts'
import type { EventSink } from './sink.ts'

export interface RunOptions {
  /** The plan, entry paths resolved (as readPlan returns them). */
  plan: PlanEntry[]
  /** Receives the posts and follows. */
  sink: EventSink
  /** bsky.Service URL that sessions (and lag probes) call GetTimeline on; without it sessions
   * are counted but send no requests. */
  dataplaneUrl?: string
  /** gRPC over HTTP/2 or HTTP/1.1; default: detected with a Ping. */
  httpVersion?: HttpVersion
  /** Also request app.bsky.feed.getTimeline from an AppView each session tick. */
  appview?: AppviewOptions
  /** Name of the run in metrics (label run=) and reports; default "run". */
  label?: string
  /** Run directory: plan.json (the effective plan), run.json and report.html go here. */
  outDir?: string
  /** Plan ms per wall ms: 10 runs a plan ten times faster. Default 1. */
  speed?: number
  /** Stop at this plan offset (ms); default: when every event and session is done. */
  maxDurationMs?: number
  /** Plan ms between two timeline requests of a session; default 10 000. */
  sessionIntervalMs?: number
  /** GetTimeline limit; default 50. */
  timelineLimit?: number
  /** Wall ms before a timeline request fails; default 10 000. */
  requestTimeoutMs?: number
  /** Wall ms after its due time at which an event or tick counts as late; default 50. */
  lateMs?: number
  /** Posts and follows in flight at the sink beyond which new ones are dropped; default 1000. */
  maxInFlight?: number
  /** Measure firehose lag on sampled posts (needs dataplaneUrl). */
  lag?: LagOptions
  /** Serve the control endpoint on this port (0: any free port); none if undefined. */
  controlPort?: number
  controlHost?: string
  /** Width of the report's time windows (wall ms); default 1000. */
  windowMs?: number
  /** Progress of the run in plan seconds (progressReporter). */
  progress?: ProgressFn
  /** Sees each event as it is dispatched (or dropped). */
  onEvent?: (event: PlanEvent, dropped: boolean) => void
  /** Render report.html into outDir at the end; default true. */
  report?: boolean
}

export interface RunStatus {
  label: string
  state: 'running' | 'finishing' | 'done'
  elapsed_ms: number
  offset_ms: number
  plan_entries: number
  events_total: number
  events_dispatched: number
  events_dropped: number
  active_sessions: number
  sink_in_flight: number
}

export interface Run {
  /** Base URL of the control endpoint, if one was asked for. */
  readonly controlUrl: string | undefined
  /** Joins a scenario file at the current runtime offset; returns the new plan entry. */
  join(scenarioName: string, file: string): Promise<PlanEntry>
  /** The effective plan: original entries and joined ones, as exported. */
  plan(): PlanEntry[]
  status(): RunStatus
  /** Ends the run at the current offset (events up to it are dispatched). */
  stop(): void
  readonly done: Promise<RunResult>
}

export interface RunResult {
  data: RunData
  dir?: string
  planPath?: string
  reportPath?: string
}

const DRAIN_MS = 30_000

export async function startRun(opts: RunOptions): Promise<Run> {
  const speed = opts.speed ?? 1
  if (!(speed > 0) || !Number.isFinite(speed)) {
    throw new ParamError(`speed must be a positive number, got ${opts.speed}`)
  }
  const maxDuration = opts.maxDurationMs
  if (maxDuration !== undefined && !(maxDuration >= 0)) {
    throw new ParamError(`max duration must be a non-negative number of ms, got ${maxDuration}`)
  }
  const label = opts.label ?? 'run'
  const settings: RunSettings = {
    speed,
    ...(maxDuration === undefined ? {} : { max_duration_ms: maxDuration }),
    session_interval_ms: opts.sessionIntervalMs ?? 10_000,
    timeline_limit: opts.timelineLimit ?? 50,
    late_ms: opts.lateMs ?? 50,
    max_in_flight: opts.maxInFlight ?? 1000,
    request_timeout_ms: opts.requestTimeoutMs ?? 10_000,
    ...(opts.lag ? { lag_sample_every: opts.lag.sampleEvery ?? 10 } : {}),
  }
  if (!(settings.session_interval_ms > 0)) {
    throw new ParamError(`session interval must be positive, got ${settings.session_interval_ms}`)
  }

  // Scenarios, each file read once however often the plan uses it.
  const scenarios = new Map<string, Promise<SortedScenario>>()
  const load = (file: string): Promise<SortedScenario> => {
    let s = scenarios.get(file)
    if (!s) {
      s = readScenario(file).then(sortScenario)
      scenarios.set(file, s)
      s.catch(() => scenarios.delete(file))
    }
    return s
  }
  const entries: EffectivePlanEntry[] = opts.plan.map((e) => ({
    ...e,
    path: path.resolve(e.path),
    joined: false,
  }))
  const queue = new EventQueue()
  const loaded = await Promise.all(entries.map((e) => load(e.path)))
  loaded.forEach((s, i) => queue.add(i, s, entries[i]!.offset_ms))

  const targets: TimelineTarget[] = []
  let lagTarget: TimelineTarget | undefined
  if (opts.dataplaneUrl) {
    const version = opts.httpVersion ?? (await detectHttpVersion(opts.dataplaneUrl))
    settings.http_version = version
    targets.push(dataplaneTarget(dataplaneClient(opts.dataplaneUrl, version)))
    // Probes get a connection of their own, so they do not queue behind session requests.
    if (opts.lag) lagTarget = dataplaneTarget(dataplaneClient(opts.dataplaneUrl, version))
  } else if (opts.lag) {
    throw new ParamError('firehose lag probes need a dataplane URL')
  }
  if (opts.appview) targets.push(appviewTarget(opts.appview))

  const rec = new Recorder({ label, windowMs: opts.windowMs })
  const m = rec.metrics
  const sessions = new Sessions({
    targets,
    rec,
    speed,
    intervalMs: settings.session_interval_ms,
    limit: settings.timeline_limit,
    timeoutMs: settings.request_timeout_ms,
    lateMs: settings.late_ms,
  })
  const lag = opts.lag && lagTarget && new LagProbes(opts.lag, lagTarget, rec, sessions.activeUsers)

  const outDir = opts.outDir && path.resolve(opts.outDir)
  if (outDir) await mkdir(outDir, { recursive: true })
  const exported = (): PlanEntry[] =>
    entries.map((e) => ({
      scenario_name: e.scenario_name,
      path: outDir ? relativePath(outDir, e.path) : e.path,
      offset_ms: e.offset_ms,
    }))
  let exporting: Promise<void> = Promise.resolve()
  const exportPlan = (): Promise<void> => {
    if (!outDir) return exporting
    const text = formatPlan(exported())
    exporting = exporting
      .then(() => writeAtomic(path.join(outDir, PLAN_FILE), text))
      .catch((err: unknown) => rec.error(`plan export: ${(err as Error).message}`))
    return exporting
  }

  let state: RunStatus['state'] = 'running'
  let startedAt = new Date()
  let timer: NodeJS.Timeout | undefined
  let lastAt = 0
  let dispatched = 0
  let dropped = 0
  let inFlight = 0
  const sinkCalls = new Set<Promise<void>>()
  let resolveDone!: (r: RunResult) => void
  let rejectDone!: (err: unknown) => void
  const done = new Promise<RunResult>((resolve, reject) => {
    resolveDone = resolve
    rejectDone = reject
  })

  const clock = (): number => rec.elapsed()

  const dispatch = (ev: PlanEvent, nowWall: number): void => {
    const dueWall = ev.at / speed
    const late = nowWall - dueWall > settings.late_ms
    lastAt = ev.at
    if (ev.kind === 'session') {
      dispatched++
      if (late) rec.eventLate('session')
      opts.onEvent?.(ev, false)
      sessions.start(ev.user_id, ev.duration_ms, dueWall)
      return
    }
    if (inFlight >= settings.max_in_flight) {
      dropped++
      rec.event(ev.kind, 'dropped')
      opts.onEvent?.(ev, true)
      return
    }
    dispatched++
    inFlight++
    rec.sinkInFlight(inFlight)
    rec.event(ev.kind, 'dispatched')
    if (late) rec.eventLate(ev.kind)
    opts.onEvent?.(ev, false)
    let call: Promise<unknown>
    try {
      call =
        ev.kind === 'post'
          ? opts.sink.post(ev.user_id)
          : opts.sink.follow(ev.user_id, ev.subject_id)
    } catch (err) {
      call = Promise.reject(err)
    }
    const tracked: Promise<void> = call
      .then(
        (result) => {
          rec.event(ev.kind, 'created')
          if (ev.kind === 'post' && lag) {
            lag.created(ev.user_id, result as { uri: string } | void, performance.now())
          }
        },
        (err: unknown) => {
          rec.event(ev.kind, 'failed')
          rec.error(`sink ${ev.kind}: ${err instanceof Error ? err.message : String(err)}`)
        },
      )
      .finally(() => {
        inFlight--
        rec.sinkInFlight(inFlight)
        sinkCalls.delete(tracked)
      })
    sinkCalls.add(tracked)
  }

  /** Dispatches every event at or before plan offset `bound`. */
  const dispatchUpTo = (bound: number): void => {
    let now = clock()
    let n = 0
    for (let at = queue.peekAt(); at !== undefined && at <= bound; at = queue.peekAt()) {
      dispatch(queue.pop()!, now)
      if (++n % 1024 === 0) now = clock()
    }
  }

  const step = (): void => {
    timer = undefined
    if (state !== 'running') return
    const nowPlan = clock() * speed
    const bound = Math.min(Math.floor(nowPlan), maxDuration ?? Infinity)
    dispatchUpTo(bound)
    m.planOffset.set(nowPlan / 1000)
    opts.progress?.(
      'run',
      Math.floor(Math.min(nowPlan, maxDuration ?? Infinity) / 1000),
      Math.ceil((maxDuration ?? queue.endOffset) / 1000),
    )
    if (maxDuration !== undefined && nowPlan >= maxDuration) return finish('duration', maxDuration)
    if (
      maxDuration === undefined &&
      queue.peekAt() === undefined &&
      sessions.active === 0 &&
      inFlight === 0
    ) {
      return finish('end', Math.max(lastAt, Math.floor(nowPlan)))
    }
    let delay = 100
    const next = queue.peekAt()
    if (next !== undefined) delay = Math.min(delay, next / speed - clock())
    if (maxDuration !== undefined) delay = Math.min(delay, maxDuration / speed - clock())
    timer = setTimeout(step, Math.max(0, delay))
  }

  let control: ControlServer | undefined

  const finish = (reason: StopReason, endOffset: number): void => {
    if (state !== 'running') return
    state = 'finishing'
    if (timer) clearTimeout(timer)
    const wall = clock()
    sessions.stopAll()
    if (reason === 'stop') lag?.stop()
    void (async () => {
      await Promise.race([Promise.allSettled([...sinkCalls]), sleep(DRAIN_MS)])
      await sessions.drain()
      await lag?.drain()
      const windows = rec.stop()
      const recorded = clock()
      for (const t of targets) t.close()
      lagTarget?.close()
      const data: RunData = {
        version: 1,
        label,
        ...(opts.dataplaneUrl ? { dataplane_url: opts.dataplaneUrl } : {}),
        ...(opts.appview ? { appview_url: opts.appview.url } : {}),
        started_at: startedAt.toISOString(),
        duration_ms: Math.round(wall),
        recorded_ms: Math.round(recorded),
        end_offset_ms: endOffset,
        stopped_by: reason,
        settings,
        plan: exported().map((e, i) => ({ ...e, joined: entries[i]!.joined })),
        errors: [...rec.errors].map(([message, count]) => ({ message, count })),
        window_ms: rec.windowMs,
        windows,
      }
      const result: RunResult = { data }
      if (outDir) {
        await exportPlan()
        await writeAtomic(path.join(outDir, RUN_DATA_FILE), `${JSON.stringify(data)}\n`)
        result.dir = outDir
        result.planPath = path.join(outDir, PLAN_FILE)
        if (opts.report !== false) {
          result.reportPath = path.join(outDir, REPORT_FILE)
          await writeFile(result.reportPath, renderReport([data]))
        }
      }
      await control?.close()
      state = 'done'
      resolveDone(result)
    })().catch((err: unknown) => {
      state = 'done'
      void control?.close()
      rejectDone(err)
    })
  }

  const join = async (scenarioName: string, file: string): Promise<PlanEntry> => {
    if (state !== 'running') throw new ConflictError('the run has ended')
    const resolved = path.resolve(file)
    const scenario = await load(resolved)
    if (state !== 'running') throw new ConflictError('the run has ended')
    // Never before an event already dispatched: the joined events sort after all of them.
    const offset = Math.max(lastAt, Math.floor(clock() * speed))
    if (maxDuration !== undefined && offset > maxDuration) {
      throw new ConflictError('the run is past its maximum duration')
    }
    entries.push({ scenario_name: scenarioName, path: resolved, offset_ms: offset, joined: true })
    queue.add(entries.length - 1, scenario, offset)
    m.planEntries.set(entries.length)
    const entry = exported()[entries.length - 1]!
    if (timer) clearTimeout(timer)
    step()
    // Answer once the plan file holds the new entry.
    await exportPlan()
    return entry
  }

  const status = (): RunStatus => ({
    label,
    state,
    elapsed_ms: Math.round(clock()),
    offset_ms: Math.floor(clock() * speed),
    plan_entries: entries.length,
    events_total: queue.total,
    events_dispatched: dispatched,
    events_dropped: dropped,
    active_sessions: sessions.active,
    sink_in_flight: inFlight,
  })

  const stop = (): void => {
    if (state !== 'running') return
    const bound = Math.min(Math.floor(clock() * speed), maxDuration ?? Infinity)
    dispatchUpTo(bound)
    finish('stop', bound)
  }

  if (opts.controlPort !== undefined) {
    control = await startControlServer(
      { join, plan: exported, status, stop, registry: m.registry },
      { port: opts.controlPort, host: opts.controlHost },
    )
  }
  m.planEntries.set(entries.length)
  await exportPlan()
  startedAt = new Date()
  rec.start()
  step()

  return {
    controlUrl: control?.url,
    join,
    plan: exported,
    status,
    stop,
    done,
  }
}

/** Runs a plan to its end. */
export async function runPlan(opts: RunOptions): Promise<RunResult> {
  return (await startRun(opts)).done
}

/** What `replay <run-dir>` needs: the exported plan and the settings that bound the run. */
export interface ReplaySource {
  plan: PlanEntry[]
  speed: number
  maxDurationMs?: number
  sessionIntervalMs: number
  timelineLimit: number
  data: RunData
}

/**
 * Reads a run directory for an identical replay: its exported plan, speed, interval, and the
 * offset it ended at if it was bounded (by a maximum duration, or stopped by hand).
 */
export async function readReplay(dir: string): Promise<ReplaySource> {
  const data = await readRunData(dir)
  const plan = await readPlan(path.join(dir, PLAN_FILE))
  const s = data.settings
  const maxDurationMs =
    s.max_duration_ms ?? (data.stopped_by === 'stop' ? data.end_offset_ms : undefined)
  return {
    plan,
    speed: s.speed,
    ...(maxDurationMs === undefined ? {} : { maxDurationMs }),
    sessionIntervalMs: s.session_interval_ms,
    timelineLimit: s.timeline_limit,
    data,
  }
}

/** A plan file in the plan format, one entry per line. */
export function formatPlan(plan: PlanEntry[]): string {
  const line = (e: PlanEntry): string =>
    `  { "scenario_name": ${JSON.stringify(e.scenario_name)}, "path": ${JSON.stringify(e.path)}, ` +
    `"offset_ms": ${e.offset_ms} }`
  return `[\n${plan.map(line).join(',\n')}\n]\n`
}

function relativePath(from: string, to: string): string {
  const rel = path.relative(from, to)
  return rel.split(path.sep).join('/')
}

async function writeAtomic(file: string, text: string): Promise<void> {
  const tmp = `${file}.${process.pid}.tmp`
  await writeFile(tmp, text)
  await rename(tmp, file)
}

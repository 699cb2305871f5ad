// The open-loop load the read benchmarks offer, run inside a load-generator worker
// (load-worker.ts): fixed rates whatever the answers do, a sequential run, and what each step
// measured, including the generator's own stalls and GC pauses (they add to the latencies it
// records, so each step reports them). Nothing heavy is imported here: the worker's heap is
// kept small so its own major GCs stay short.
import {
  constants as perfConstants,
  monitorEventLoopDelay,
  performance,
  PerformanceObserver,
} from 'node:perf_hooks'
import { Code, ConnectError } from '@connectrpc/connect'

/** Requests in flight at most: beyond, a request is counted as dropped instead of sent. */
const MAX_IN_FLIGHT = 4000

const log = (...a: unknown[]) => console.log('[load]', ...a)

/** One request for a reader (a GetTimeline first page, an AppView page…), through a side's client. */
export type Read = (reader: string) => Promise<unknown>

export interface StepResult {
  offered: number
  achieved: number
  p50: number
  p95: number
  p99: number
  errors: number
  /** Of the errors, refused as overloaded (resource_exhausted). */
  shed: number
  dropped: number
  /** The generator's CPU over the step, as a share of one core. */
  generatorCpu: number
  /** Upper bound (a latency bucket, ms) of the servers' own p99, without the generator's share. */
  serverP99Within?: number
  /** The servers' minor page faults per answered read (pages mapped on first touch). */
  serverFaultsPerRead?: number
  /** The servers' GC pauses over the step, by kind (count, summed ms). */
  serverGc?: string
  /** The servers' longest event-loop delay over the step, ms. */
  serverLagMaxMs?: number
  /** The generator's own longest stall (event-loop delay, ms): it adds to the latencies. */
  generatorStallMs: number
  /** The generator's GC during the step: pauses by kind (count, longest ms), heap used at its start (MB). */
  generatorGc: string
  /** The servers' CPU per answered read, ms (ours only). */
  cpuPerRead?: number
  /** Of it, the kernel's share (system time: system calls, loopback TCP), ms. */
  sysPerRead?: number
  /** Redis's CPU per answered read (its INFO cpu, user and system), ms (ours only). */
  redisPerRead?: number
  /** Redis's minor page faults per answered read. */
  redisFaultsPerRead?: number
}

/** Every reader's first page, a few requests at a time. */
export async function readAll(read: Read, readers: string[]): Promise<void> {
  for (let i = 0; i < readers.length; i += 8) {
    await Promise.all(readers.slice(i, i + 8).map(read))
  }
}

export function quantile(sorted: Float64Array, q: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]! : NaN
}

/** Offers `rate` req/s for `seconds`, each for a reader drawn in a fixed sequence (open loop). */
export async function step(
  read: Read,
  readers: string[],
  rate: number,
  seconds: number,
): Promise<StepResult> {
  const total = Math.round(rate * seconds)
  // Nothing per request outlives its answer (no list of promises, no growing array): whatever the
  // generator keeps survives its minor GCs, and its pauses would count as the server's latency.
  const latencies = new Float64Array(total)
  let answered = 0
  let errors = 0
  const errorKinds = new Map<string, number>()
  let shed = 0
  let dropped = 0
  let inFlight = 0
  let sent = 0
  const cpu0 = process.cpuUsage()
  const stalls = monitorEventLoopDelay({ resolution: 1 })
  stalls.enable()
  const gc = gcWatch()
  const t0 = performance.now()
  let allAnswered = () => {}
  const answeredAll = new Promise<void>((resolve) => (allAnswered = resolve))
  const settle = () => {
    if (--inFlight === 0 && sent >= total) allAnswered()
  }
  const failed = (e: unknown) => {
    errors++
    const err = ConnectError.from(e)
    if (err.code === Code.ResourceExhausted) shed++
    const kind = `${Code[err.code]}: ${err.rawMessage.slice(0, 80)}`
    errorKinds.set(kind, (errorKinds.get(kind) ?? 0) + 1)
    settle()
  }
  await new Promise<void>((resolve) => {
    const tick = () => {
      const due = Math.min(total, Math.floor(((performance.now() - t0) / 1000) * rate))
      while (sent < due) {
        const reader = readers[sent % readers.length]!
        sent++
        if (inFlight >= MAX_IN_FLIGHT) {
          dropped++
          continue
        }
        inFlight++
        const start = performance.now()
        read(reader).then(() => {
          latencies[answered++] = performance.now() - start
          settle()
        }, failed)
      }
      if (sent >= total) return resolve()
      // Sleep until the next request is due (no spinning: the generator shares the cores).
      const next = t0 + ((sent + 1) / rate) * 1000
      setTimeout(tick, Math.max(0, next - performance.now()))
    }
    tick()
  })
  if (inFlight > 0) await answeredAll
  if (errorKinds.size) log('errors by kind:', Object.fromEntries(errorKinds))
  const elapsed = (performance.now() - t0) / 1000
  const cpu = process.cpuUsage(cpu0)
  stalls.disable()
  const sorted = latencies.subarray(0, answered).sort()
  return {
    offered: rate,
    achieved: answered / elapsed,
    p50: quantile(sorted, 0.5),
    p95: quantile(sorted, 0.95),
    p99: quantile(sorted, 0.99),
    errors,
    shed,
    dropped,
    generatorCpu: (cpu.user + cpu.system) / 1e6 / elapsed,
    generatorStallMs: stalls.max / 1e6,
    generatorGc: gc.stop(),
  }
}

/** The generator's GC pauses while watched, by kind, and its heap when the watch began. */
function gcWatch(): { stop(): string } {
  const heapMb = process.memoryUsage().heapUsed / 2 ** 20
  const kinds = new Map<string, { n: number; max: number }>()
  const names: Record<number, string> = {
    [perfConstants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
    [perfConstants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
    [perfConstants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
    [perfConstants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb',
  }
  const observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const kind =
        names[(e as unknown as { detail?: { kind?: number } }).detail?.kind ?? -1] ?? 'other'
      const k = kinds.get(kind) ?? { n: 0, max: 0 }
      k.n++
      k.max = Math.max(k.max, e.duration)
      kinds.set(kind, k)
    }
  })
  observer.observe({ entryTypes: ['gc'] })
  return {
    stop() {
      observer.disconnect()
      const parts = [...kinds].map(([k, v]) => `${k} ${v.n}× ≤${v.max.toFixed(1)} ms`)
      return `heap ${heapMb.toFixed(0)} MB at start; ${parts.join(', ') || 'none'}`
    },
  }
}

/** One request at a time: the latency of a read on an idle server. */
export async function sequential(read: Read, readers: string[], n: number): Promise<number> {
  const latencies = new Float64Array(n)
  for (let i = 0; i < n; i++) {
    const start = performance.now()
    await read(readers[i % readers.length]!)
    latencies[i] = performance.now() - start
  }
  return quantile(latencies.sort(), 0.5)
}

// The flags `run`, `replay` and `compare` share (cli.ts), read into run options: values checked
// up front, each error naming its flag.
import { setTimeout as sleep } from 'node:timers/promises'
import { readUserbaseParams } from './files.ts'
import type { UserbaseParams } from './params.ts'
import type { AppviewOptions, HttpVersion } from './run/client.ts'
import { userbaseFollowerOf } from './run/followers.ts'
import type { LagOptions } from './run/lag.ts'
import type { RunOptions } from './run/runner.ts'
import type { ClosableSink } from './run/sink.ts'
import { ParamError } from './validate.ts'

export const RUN_FLAGS = {
  dataplane: { type: 'string' },
  stock: { type: 'string' },
  ours: { type: 'string' },
  labels: { type: 'string' },
  label: { type: 'string' },
  title: { type: 'string' },
  speed: { type: 'string' },
  duration: { type: 'string' },
  interval: { type: 'string' },
  limit: { type: 'string' },
  timeout: { type: 'string' },
  late: { type: 'string' },
  'max-in-flight': { type: 'string' },
  'http-version': { type: 'string' },
  'control-port': { type: 'string' },
  'firehose-port': { type: 'string' },
  'plc-port': { type: 'string' },
  userbase: { type: 'string' },
  'lag-every': { type: 'string' },
  'lag-timeout': { type: 'string' },
  'start-delay': { type: 'string' },
  appview: { type: 'string' },
  'appview-admin-password': { type: 'string' },
} as const

export type Flags = Partial<Record<keyof typeof RUN_FLAGS | 'out', string>>

/** Run options shared by run, replay and compare, from the flags. */
export async function runOptions(flags: Flags): Promise<{
  options: Omit<RunOptions, 'plan' | 'sink'>
  userbase?: UserbaseParams
}> {
  const options: Omit<RunOptions, 'plan' | 'sink'> = {
    controlPort: intFlag(flags, 'control-port', 9465, 0),
  }
  if (flags.speed !== undefined) {
    const speed = Number(flags.speed)
    if (!(speed > 0) || !Number.isFinite(speed)) {
      throw new ParamError(`--speed must be a positive number, got ${JSON.stringify(flags.speed)}`)
    }
    options.speed = speed
  }
  const duration = durationFlag(flags, 'duration')
  if (duration !== undefined) options.maxDurationMs = duration
  const interval = durationFlag(flags, 'interval')
  if (interval !== undefined) options.sessionIntervalMs = interval
  const timeout = durationFlag(flags, 'timeout')
  if (timeout !== undefined) options.requestTimeoutMs = timeout
  const late = durationFlag(flags, 'late')
  if (late !== undefined) options.lateMs = late
  if (flags.limit !== undefined) options.timelineLimit = intFlag(flags, 'limit', 50, 1)
  if (flags['max-in-flight'] !== undefined) {
    options.maxInFlight = intFlag(flags, 'max-in-flight', 1000, 1)
  }
  const version = flags['http-version']
  if (version !== undefined) {
    if (version !== '1.1' && version !== '2') {
      throw new ParamError(`--http-version must be 1.1 or 2, got ${JSON.stringify(version)}`)
    }
    options.httpVersion = version as HttpVersion
  }
  if (flags.appview) {
    const appview: AppviewOptions = { url: flags.appview }
    const password = flags['appview-admin-password'] ?? process.env.SIM_APPVIEW_ADMIN_PASSWORD
    if (password) appview.adminPassword = password
    else console.error('warning: --appview without an admin password: requests will fail auth')
    options.appview = appview
  }
  let userbase: UserbaseParams | undefined
  if (flags.userbase) userbase = await readUserbaseParams(flags.userbase)
  const lagEvery = intFlag(flags, 'lag-every', 10, 0)
  if (userbase && lagEvery > 0) {
    const lag: LagOptions = { followerOf: userbaseFollowerOf(userbase), sampleEvery: lagEvery }
    const lagTimeout = durationFlag(flags, 'lag-timeout')
    if (lagTimeout !== undefined) lag.timeoutMs = lagTimeout
    options.lag = lag
  }
  return userbase ? { options, userbase } : { options }
}

/** The event sink of the CLI: a local firehose and PLC stub for the simulated users. */
export async function createSink(
  flags: Flags,
  userbase: UserbaseParams | undefined,
): Promise<ClosableSink & { url: string; plcUrl: string; close(): Promise<void> }> {
  // Loaded on demand: the other commands do not need the emitter's dependencies.
  const { LocalNetwork } = await import('./emit/index.ts')
  return LocalNetwork.start({
    seed: userbase?.seed ?? 1,
    ...(userbase ? { handleDomain: userbase.handle_domain, users: userbase.num_users } : {}),
    port: intFlag(flags, 'firehose-port', 0, 0),
    plcPort: intFlag(flags, 'plc-port', 0, 0),
  })
}

/** Waits --start-delay once the firehose is up, so indexers (re)connect before the plan. */
export async function startDelay(flags: Flags, sink: { url: string }): Promise<void> {
  const ms = durationFlag(flags, 'start-delay') ?? 0
  if (ms <= 0) return
  console.error(`firehose ${sink.url} is up; starting the plan in ${ms / 1000} s`)
  await sleep(ms)
}

function intFlag(flags: Flags, name: keyof Flags, fallback: number, min: number): number {
  const raw = flags[name]
  if (raw === undefined) return fallback
  const n = Number(raw)
  if (!Number.isSafeInteger(n) || n < min) {
    throw new ParamError(`--${name} must be an integer >= ${min}, got ${JSON.stringify(raw)}`)
  }
  return n
}

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }

/** A duration flag: milliseconds, or a number with ms / s / m / h. */
function durationFlag(flags: Flags, name: keyof Flags): number | undefined {
  const raw = flags[name]
  if (raw === undefined) return undefined
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(raw.trim())
  if (!m) {
    throw new ParamError(
      `--${name} must be a duration (ms, or with ms/s/m/h), got ${JSON.stringify(raw)}`,
    )
  }
  return Math.round(Number(m[1]) * UNITS[m[2] ?? 'ms']!)
}

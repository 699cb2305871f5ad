// Degree statistics of a generated userbase: what an operator checks before loading it.
import type { UserbaseParams } from './params.ts'
import { followersOf } from './powerlaw.ts'
import { followGraph } from './userbase.ts'

export interface Percentiles {
  p50: number
  p99: number
  max: number
  mean: number
}

export interface UserbaseStats {
  users: number
  follows: number
  inDegree: Percentiles
  outDegree: Percentiles
  elapsedMs: number
  followsPerSecond: number
  /** Peak resident set size of this process during generation. */
  maxRssBytes: number
}

/** Nearest-rank percentiles of degrees indexed by user id (index 0 ignored). Sorts a copy. */
export function percentiles(byId: Int32Array): Percentiles {
  const sorted = byId.slice(1).sort()
  const at = (p: number): number => sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)] ?? 0
  let sum = 0
  for (const d of sorted) sum += d
  return { p50: at(0.5), p99: at(0.99), max: at(1), mean: sum / Math.max(1, sorted.length) }
}

export function inDegrees(params: UserbaseParams): Int32Array {
  const degrees = new Int32Array(params.num_users + 1)
  for (let r = 1; r <= params.num_users; r++) {
    degrees[r] = followersOf(r, params.num_users, params.follower_density)
  }
  return degrees
}

export interface MeasureOptions {
  /** Sees each subject's followers (e.g. to write them); a promise means "wait". */
  onSubject?: (subject: number, followers: Int32Array) => Promise<void> | undefined
  /** Running total of follows, for progress output. */
  onFollows?: (done: number, subject: number) => void
}

/** Generates the whole graph, handing it to `onSubject` if given, and measures it. */
export async function measureUserbase(
  params: UserbaseParams,
  opts: MeasureOptions = {},
): Promise<UserbaseStats> {
  const started = performance.now()
  const outDegree = new Int32Array(params.num_users + 1)
  let follows = 0
  let maxRss = process.memoryUsage.rss()
  for (const { subject, followers } of followGraph(params, outDegree)) {
    follows += followers.length
    const pending = opts.onSubject?.(subject, followers)
    if (pending) await pending
    // The first subjects hold most follows: report on them one by one, then every 4096.
    if (subject % 4096 === 0 || followers.length > 65536) {
      maxRss = Math.max(maxRss, process.memoryUsage.rss())
      opts.onFollows?.(follows, subject)
    }
  }
  const elapsedMs = performance.now() - started
  maxRss = Math.max(maxRss, process.memoryUsage.rss())
  return {
    users: params.num_users,
    follows,
    inDegree: percentiles(inDegrees(params)),
    outDegree: percentiles(outDegree),
    elapsedMs,
    followsPerSecond: follows / (elapsedMs / 1000),
    maxRssBytes: maxRss,
  }
}

export function formatStats(s: UserbaseStats): string {
  const deg = (p: Percentiles): string =>
    `p50 ${p.p50}  p99 ${p.p99}  max ${p.max}  mean ${p.mean.toFixed(1)}`
  return [
    `users      ${s.users}`,
    `follows    ${s.follows}`,
    `in-degree  ${deg(s.inDegree)}`,
    `out-degree ${deg(s.outDegree)}`,
    `generated  in ${(s.elapsedMs / 1000).toFixed(1)} s: ${Math.round(s.followsPerSecond)} follows/s, ` +
      `max RSS ${(s.maxRssBytes / 2 ** 20).toFixed(0)} MiB`,
  ].join('\n')
}

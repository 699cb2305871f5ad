// A fuzz campaign: seed after seed, generate a sequence, check it at batch sizes 1, a middle
// size and the whole sequence, and shrink whatever differs into a regression script. The seed
// alone fixes the sequence, the middle batch size and the celebrity threshold, so a failing
// seed replays exactly (FUZZ_SEEDS=<seed> pnpm fuzz:indexer).
import { Rng } from '@openplane/sim'
import { generate } from './generate.ts'
import type { BatchDifference, CheckOptions, Fuzzer } from './run.ts'
import { formatRegression } from './script.ts'
import type { FuzzEvent } from './sequence.ts'
import { shrink } from './shrink.ts'

export interface SeedPlan {
  seed: number
  events: FuzzEvent[]
  check: CheckOptions
}

/** Everything a seed decides. Lengths are drawn from [minLength, maxLength]. */
export function planSeed(seed: number, minLength: number, maxLength: number): SeedPlan {
  const rng = new Rng(seed, 0xba7c4)
  const length = minLength + rng.int(maxLength - minLength + 1)
  const events = generate(seed, { length })
  const middle = 2 + rng.int(Math.max(1, length - 2))
  // A third of the seeds make anyone with two followers a celebrity (merged on read).
  const celebrityFollowers = seed % 3 === 0 ? 2 : Infinity
  return { seed, events, check: { batchSizes: [1, middle, Infinity], celebrityFollowers } }
}

export interface Failure {
  seed: number
  differences: BatchDifference[]
  shrunk: FuzzEvent[]
  script: string
}

export interface CampaignResult {
  sequences: number
  ops: number
  differences: number
  failures: Failure[]
}

export const opCount = (events: FuzzEvent[]): number =>
  events.reduce((n, e) => n + ('ops' in e ? e.ops.length : 1), 0)

export async function runCampaign(
  fuzzer: Fuzzer,
  opts: {
    seeds: Iterable<number>
    minLength: number
    maxLength: number
    /** Stop taking new seeds after this time (ms since the epoch). */
    until?: number
    /** Time for shrinking one failure. */
    shrinkMs?: number
    /** Failures shrunk at most (later ones are reported as generated). */
    shrinkLimit?: number
    onSequence?: (seed: number, differences: number) => void
  },
): Promise<CampaignResult> {
  const result: CampaignResult = { sequences: 0, ops: 0, differences: 0, failures: [] }
  for (const seed of opts.seeds) {
    if (opts.until !== undefined && Date.now() > opts.until) break
    const plan = planSeed(seed, opts.minLength, opts.maxLength)
    const diffs = await fuzzer.check(plan.events, plan.check)
    result.sequences++
    result.ops += opCount(plan.events)
    result.differences += diffs.length
    opts.onSequence?.(seed, diffs.length)
    if (!diffs.length) continue
    const first = diffs[0]!
    if (result.failures.length >= (opts.shrinkLimit ?? Infinity)) {
      result.failures.push({
        seed,
        differences: diffs,
        shrunk: plan.events,
        script: formatRegression(
          `seed ${seed}: ${first.kind} difference`,
          plan.events,
          diffs,
          seed,
        ),
      })
      continue
    }
    // Shrink against the first failing batch size and kind of difference.
    const fails = async (candidate: FuzzEvent[]) =>
      (await fuzzer.check(candidate, { ...plan.check, batchSizes: [first.batchSize] })).some(
        (d) => d.kind === first.kind,
      )
    const shrunk = await shrink(plan.events, fails, {
      maxChecks: 400,
      deadline: Date.now() + (opts.shrinkMs ?? 120_000),
    })
    const final = await fuzzer.check(shrunk, plan.check)
    result.failures.push({
      seed,
      differences: diffs,
      shrunk,
      script: formatRegression(`seed ${seed}: ${first.kind} difference`, shrunk, final, seed),
    })
  }
  return result
}

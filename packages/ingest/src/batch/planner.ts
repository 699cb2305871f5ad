// Runs a batch's steps against its plan until every read they make is loaded. A step that misses
// is undone; the pass goes on so that the rest of the batch notes what it misses too; everything
// noted is loaded at once and planning resumes at the first step that missed. A step that fails
// for another reason is undone and reported, unless a miss before it in the pass may be the cause
// (it is planned again anyway).
import type { Plan } from './plan.ts'

export interface Step {
  run(plan: Plan): void
  /** Reads what the step is known to read beyond its own rows (noted as misses, not loaded). */
  reads?(plan: Plan): void
  /** The step failed (its changes are undone): count and log it, into the plan. */
  failed(plan: Plan, err: unknown): void
}

/** A bound on passes: each loads new keys, so only a bug could need more. */
const MAX_PASSES = 1000
/**
 * Steps planned between two yields to the event loop. A pass over a full batch takes tens of
 * milliseconds of this thread; the batch before it is being written meanwhile, and each of its
 * statements waits for this thread to read Postgres' answer and send the next one. Yielding
 * lets the write go on beside the plan instead of after it.
 */
const STEPS_PER_SLICE = 200
/**
 * Steps a pass runs past its last miss to find more, before it stops to load. Misses come in a
 * run in a batch of new records (every step misses its own rows), and then the pass goes on
 * through the batch; a lone miss late in a pass costs this many steps run twice, not the rest.
 */
const DISCOVER_AFTER_MISS = 50
const yieldToLoop = () => new Promise<void>((resolve) => setImmediate(resolve))

/**
 * Notes what each step is known to read (Step.reads), yielding as a pass does: over a full
 * batch this was the longest stretch the thread ran without serving anything else (up to
 * 150 ms measured), which reads served by the same process wait out.
 */
export async function noteReads(plan: Plan, steps: Step[]): Promise<void> {
  for (let i = 0; i < steps.length; i++) {
    if (i % STEPS_PER_SLICE === STEPS_PER_SLICE - 1) await yieldToLoop()
    steps[i]!.reads?.(plan)
  }
}

/** Plans the steps; returns the passes (1 + loads) and how many times a step ran in all. */
export async function planSteps(
  plan: Plan,
  steps: Step[],
): Promise<{ passes: number; runs: number }> {
  let resume = 0
  let runs = 0
  for (let passes = 1; ; passes++) {
    if (passes > MAX_PASSES) throw new Error(`batch plan did not settle in ${MAX_PASSES} passes`)
    let first = -1
    let firstMark = plan.mark()
    let lastMiss = -1
    let ran = 0
    for (let i = resume; i < steps.length; i++) {
      // Every step after a miss runs again after the load, so a pass goes on past one only to
      // find more misses: while they keep coming (a batch of new records: every step misses).
      // Once misses are sparse, it stops soon after the last one.
      if (first >= 0 && i - lastMiss > DISCOVER_AFTER_MISS) break
      if ((i - resume) % STEPS_PER_SLICE === STEPS_PER_SLICE - 1) await yieldToLoop()
      ran++
      const mark = plan.mark()
      const misses = plan.state.missCount
      let failure: { err: unknown } | undefined
      try {
        steps[i]!.run(plan)
      } catch (err) {
        failure = { err }
      }
      if (plan.state.missCount !== misses) {
        plan.rollback(mark)
        lastMiss = i
        if (first < 0) {
          first = i
          firstMark = mark
        }
      } else if (failure) {
        plan.rollback(mark)
        if (first < 0) steps[i]!.failed(plan, failure.err)
      }
    }
    runs += ran
    if (first < 0) return { passes, runs }
    plan.rollback(firstMark)
    resume = first
    await plan.state.load()
  }
}

/** Runs a read-only computation over the plan's state, loading until it misses nothing. */
export async function settled<T>(plan: Plan, compute: () => T): Promise<T> {
  for (let passes = 1; ; passes++) {
    if (passes > MAX_PASSES) throw new Error(`batch plan did not settle in ${MAX_PASSES} passes`)
    const misses = plan.state.missCount
    const value = compute()
    if (plan.state.missCount === misses) return value
    await plan.state.load()
  }
}

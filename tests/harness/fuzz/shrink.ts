// Shrinking a failing sequence: drop runs of events (halving the run length down to single
// events), then single ops of multi-op commits, then optional fields and time gaps, keeping
// each cut that still fails. What is left is usually a handful of events.
import type { FuzzEvent, Op } from './sequence.ts'

export interface ShrinkBudget {
  /** Give up trying further cuts after this many checks. */
  maxChecks: number
  /** …or at this time (ms since the epoch). */
  deadline: number
}

const KEEP = new Set([
  'by',
  'ops',
  'identity',
  'account',
  'sync',
  'create',
  'update',
  'delete',
  'rkey',
])

export async function shrink(
  seq: FuzzEvent[],
  fails: (candidate: FuzzEvent[]) => Promise<boolean>,
  budget: ShrinkBudget,
): Promise<FuzzEvent[]> {
  let checks = 0
  const within = () => checks < budget.maxChecks && Date.now() < budget.deadline
  const tryCut = async (candidate: FuzzEvent[]) => {
    checks++
    return fails(candidate)
  }
  let best = seq

  // Runs of events.
  for (let size = Math.max(1, Math.floor(best.length / 2)); size >= 1 && within();) {
    let cut = false
    for (let i = 0; i < best.length && within();) {
      const candidate = [...best.slice(0, i), ...best.slice(i + size)]
      if (candidate.length && (await tryCut(candidate))) {
        best = candidate
        cut = true
      } else {
        i += size
      }
    }
    if (!cut) size = Math.floor(size / 2)
  }

  // Single ops of commits with several.
  const opsOf = (e: number): Op[] | undefined => {
    const evt = best[e]!
    return 'ops' in evt ? evt.ops : undefined
  }
  const withOps = (e: number, ops: Op[]): FuzzEvent[] =>
    best.map((x, i) => (i === e && 'ops' in x ? { ...x, ops } : x))
  for (let e = 0; e < best.length && within(); e++) {
    for (let o = 0; (opsOf(e)?.length ?? 0) > 1 && o < opsOf(e)!.length && within();) {
      const candidate = withOps(
        e,
        opsOf(e)!.filter((_, i) => i !== o),
      )
      if (await tryCut(candidate)) best = candidate
      else o++
    }
  }

  // Optional fields of events and ops.
  for (let e = 0; e < best.length && within(); e++) {
    for (const key of Object.keys(best[e]!)) {
      if (KEEP.has(key) || !within()) continue
      const evt = { ...best[e]! } as Record<string, unknown>
      delete evt[key]
      const candidate = best.map((x, i) => (i === e ? (evt as unknown as FuzzEvent) : x))
      if (await tryCut(candidate)) best = candidate
    }
    for (let o = 0; o < (opsOf(e)?.length ?? 0); o++) {
      for (const key of Object.keys(opsOf(e)![o]!)) {
        if (KEEP.has(key) || !within()) continue
        const op = { ...opsOf(e)![o]! } as Record<string, unknown>
        delete op[key]
        const candidate = withOps(
          e,
          opsOf(e)!.map((x, i) => (i === o ? (op as unknown as Op) : x)),
        )
        if (await tryCut(candidate)) best = candidate
      }
    }
  }
  return best
}

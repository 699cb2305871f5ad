// Reading lists the same way on every backend: a raw descending range (which may end in the
// ghost) becomes a slice, and slices of several lists merge into one exact-or-not page.
import { isGhost } from './member.ts'

export interface Slice {
  /** Item members after the cursor, newest first, at most the requested count. */
  members: readonly string[]
  /** The list's horizon when it has one (it was trimmed or rebuilt from a bounded read). */
  ghost: string | undefined
}

/**
 * `rows` come from a descending range that asked for `count + 1` rows (room for the ghost); the
 * caller owns them: they are cut in place to the members above the ghost, at most `count`.
 */
export function sliceOf(rows: string[], count: number, ghost: string | undefined): Slice {
  let n = 0
  while (n < rows.length && n < count && !isGhost(rows[n]!)) n++
  rows.length = n
  return { members: rows, ghost }
}

/**
 * Merges slices into the newest `limit` members. Exact when every slice either filled its count
 * (its top rows are known), has no horizon, was read down to a floor above its horizon, or when
 * the merged page is full and ends above the slice's horizon (nothing unknown can sort into it).
 */
export function mergeSlices(
  slices: readonly Slice[],
  limit: number,
  floor?: string,
): { members: string[]; complete: boolean } {
  const members = newest(slices, limit)
  const last = members.at(-1)
  const complete = slices.every(
    (s) =>
      s.members.length >= limit ||
      s.ghost === undefined ||
      // Read down to a floor above the horizon: everything at or above the floor is known.
      (floor !== undefined && floor > s.ghost) ||
      (members.length === limit && last !== undefined && last > s.ghost),
  )
  return { members, complete }
}

/**
 * The newest `limit` members of descending slices, a member in several once: a merge of their
 * heads, not a sort of all of them (a celebrity merge reads a few dozen lists, most of them
 * empty, for a page of one).
 */
function newest(slices: readonly Slice[], limit: number): string[] {
  const lists: (readonly string[])[] = []
  for (const s of slices) if (s.members.length) lists.push(s.members)
  if (lists.length <= 1) return (lists[0] ?? []).slice(0, Math.max(limit, 0))
  const at = new Array<number>(lists.length).fill(0)
  const out: string[] = []
  let last: string | undefined
  while (out.length < limit) {
    let best = -1
    let top: string | undefined
    for (let i = 0; i < lists.length; i++) {
      const m = lists[i]![at[i]!]
      if (m !== undefined && (top === undefined || m > top)) {
        top = m
        best = i
      }
    }
    if (top === undefined) break
    at[best]!++
    if (top !== last) out.push(top)
    last = top
  }
  return out
}

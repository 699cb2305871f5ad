// Reading lists the same way on every backend: a raw descending range (which may end in the
// ghost) becomes a slice, and slices of several lists merge into one exact-or-not page.
import { isGhost } from './member.ts'

export interface Slice {
  /** Item members after the cursor, newest first, at most the requested count. */
  members: string[]
  /** The list's horizon when it has one (it was trimmed or rebuilt from a bounded read). */
  ghost: string | undefined
}

/** Members descending, as Redis orders them (byte order; members are ASCII). */
export const descending = (a: string, b: string): number => (a < b ? 1 : a > b ? -1 : 0)

/** `rows` come from a descending range that asked for `count + 1` rows (room for the ghost). */
export function sliceOf(rows: readonly string[], count: number, ghost: string | undefined): Slice {
  const members: string[] = []
  for (const row of rows) {
    if (isGhost(row) || members.length === count) break
    members.push(row)
  }
  return { members, ghost }
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
  const all = slices.length === 1 ? slices[0]!.members : slices.flatMap((s) => s.members)
  const sorted = slices.length === 1 ? all : [...new Set(all)].sort(descending)
  const members = sorted.slice(0, limit)
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

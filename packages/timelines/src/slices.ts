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
 * heads, not a sort of all of them. A celebrity merge reads a few dozen lists for a page, so the
 * heads are kept in a max-heap: a page costs about limit·log(lists) comparisons, where scanning
 * every head for each member cost limit·lists (the largest self time of a home read's merge).
 */
function newest(slices: readonly Slice[], limit: number): string[] {
  const lists: (readonly string[])[] = []
  for (const s of slices) if (s.members.length) lists.push(s.members)
  if (lists.length <= 1) return (lists[0] ?? []).slice(0, Math.max(limit, 0))
  // Heap slot p holds list from[p], whose next unread member is keys[p].
  const keys = lists.map((l) => l[0]!)
  const from = lists.map((_, i) => i)
  const next = new Array<number>(lists.length).fill(1)
  let size = lists.length
  for (let p = (size >> 1) - 1; p >= 0; p--) siftDown(keys, from, size, p)
  const out: string[] = []
  let last: string | undefined
  while (out.length < limit && size > 0) {
    const top = keys[0]!
    // Equal members are popped one after another: nothing above them is left.
    if (top !== last) out.push(top)
    last = top
    const list = from[0]!
    const m = lists[list]![next[list]!++]
    if (m !== undefined) keys[0] = m
    else {
      size--
      keys[0] = keys[size]!
      from[0] = from[size]!
    }
    siftDown(keys, from, size, 0)
  }
  return out
}

/** Moves slot p's entry down the max-heap of `size` slots until its children sort below it. */
function siftDown(keys: string[], from: number[], size: number, p: number): void {
  const key = keys[p]!
  const list = from[p]!
  for (;;) {
    let c = 2 * p + 1
    if (c >= size) break
    if (c + 1 < size && keys[c + 1]! > keys[c]!) c++
    if (keys[c]! <= key) break
    keys[p] = keys[c]!
    from[p] = from[c]!
    p = c
  }
  keys[p] = key
  from[p] = list
}

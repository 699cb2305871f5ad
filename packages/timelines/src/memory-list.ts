// One list in process, step for step what the Lua scripts do to a sorted set, so the two stores
// answer alike: members ascending (rank order), the ghost kept apart.
import { feedField, ghostOf } from './member.ts'
import type { Slice } from './slices.ts'

export type ListState = 'ready' | 'warming'

export class MemoryList {
  state: ListState
  /** Item members, ascending. */
  items: string[] = []
  ghost: string | undefined

  constructor(state: ListState) {
    this.state = state
  }

  /**
   * Adds members; those sorting below the horizon are dropped. Past `above` items, trims back to
   * `target`. Returns how many were added.
   */
  add(members: readonly string[], target: number, above: number): number {
    let n = 0
    for (const m of members) {
      if (this.ghost !== undefined && m < this.ghost) continue
      const i = lowerBound(this.items, m)
      if (this.items[i] === m) continue
      this.items.splice(i, 0, m)
      n++
    }
    if (n > 0 && this.items.length > above) this.trim(target)
    return n
  }

  /** Keeps the newest `target` items; the highest trimmed one becomes the horizon. */
  trim(target: number): void {
    const excess = this.items.length - target
    if (excess <= 0) return
    this.ghost = ghostOf(this.items[excess - 1]!)
    this.items.splice(0, excess)
  }

  remove(member: string): number {
    const i = lowerBound(this.items, member)
    if (this.items[i] !== member) return 0
    this.items.splice(i, 1)
    return 1
  }

  removeWhere(match: (field: string, repost: boolean) => boolean): number {
    const before = this.items.length
    this.items = this.items.filter((m) => {
      const f = feedField(m)
      return !match(f.field, f.repost)
    })
    return before - this.items.length
  }

  /** Up to `count` members below `bound` (exclusive) and at or above `floor`, newest first. */
  slice(bound: string | undefined, count: number, floor?: string): Slice {
    const end = bound === undefined ? this.items.length : lowerBound(this.items, bound)
    const members: string[] = []
    for (let i = end - 1; i >= 0 && members.length < count; i--) {
      if (floor !== undefined && this.items[i]! < floor) break
      members.push(this.items[i]!)
    }
    return { members, ghost: this.ghost }
  }

  /**
   * Becomes READY with `members` (ascending) and `ghost`, merged with what was collected while
   * warming. Everything below the higher of the two horizons is dropped, then the list is trimmed.
   */
  materialise(members: readonly string[], ghost: string | undefined, target: number): void {
    const warming = this.state === 'warming'
    const collected = warming ? this.items : []
    const horizons = [warming ? this.ghost : undefined, ghost].filter((g) => g !== undefined)
    const horizon = horizons.sort().at(-1)
    const merged = [...new Set([...collected, ...members])].sort()
    this.items = horizon === undefined ? merged : merged.filter((m) => m > horizon)
    this.ghost = horizon
    this.state = 'ready'
    this.trim(target)
  }

  /** Rough bytes held: V8 one-byte (ASCII) strings with their headers, and array slots. */
  approxBytes(): number {
    let bytes = 64
    for (const m of this.items) bytes += m.length + 40
    return bytes
  }
}

/** First index whose member is >= m. */
function lowerBound(items: readonly string[], m: string): number {
  let lo = 0
  let hi = items.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (items[mid]! < m) lo = mid + 1
    else hi = mid
  }
  return lo
}

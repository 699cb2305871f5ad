// The events of a simulation plan in dispatch order: every entry's scenario shifted by the entry's
// offset, merged lazily (a heap of per-series cursors, no copy of the events). The order is total
// and depends only on the plan: absolute time, then plan entry, then series (follows, posts,
// sessions), then the series' own order (time, user, subject or duration). A scenario joined at
// the current offset therefore lands after everything already dispatched, and replaying the
// exported plan yields the same sequence.
import {
  byOffset,
  type FollowEvent,
  type PostEvent,
  type Scenario,
  type SessionEvent,
} from '../scenario.ts'

export type PlanEvent =
  | { kind: 'follow'; at: number; entry: number; user_id: number; subject_id: number }
  | { kind: 'post'; at: number; entry: number; user_id: number }
  | { kind: 'session'; at: number; entry: number; user_id: number; duration_ms: number }

/** A scenario with each series in dispatch order. */
export interface SortedScenario {
  follows: readonly FollowEvent[]
  posts: readonly PostEvent[]
  sessions: readonly SessionEvent[]
  /** Offset at which the scenario's last event (or session) ends. */
  span_ms: number
}

export function sortScenario(s: Scenario): SortedScenario {
  const follows = [...(s.follows ?? [])].sort(
    (a, b) => byOffset(a, b) || a.subject_id - b.subject_id,
  )
  const posts = [...(s.posts ?? [])].sort(byOffset)
  const sessions = [...(s.sessions ?? [])].sort(
    (a, b) => byOffset(a, b) || a.duration_ms - b.duration_ms,
  )
  let span = 0
  for (const e of follows) span = Math.max(span, e.offset_ms)
  for (const e of posts) span = Math.max(span, e.offset_ms)
  for (const e of sessions) span = Math.max(span, e.offset_ms + e.duration_ms)
  return { follows, posts, sessions, span_ms: span }
}

interface Cursor {
  entry: number
  rank: number
  base: number
  i: number
  events: readonly (FollowEvent | PostEvent | SessionEvent)[]
}

const at = (c: Cursor): number => c.base + c.events[c.i]!.offset_ms

/** Cursors never tie: two cursors of one entry differ in series. */
const before = (a: Cursor, b: Cursor): boolean =>
  (at(a) - at(b) || a.entry - b.entry || a.rank - b.rank) < 0

export class EventQueue {
  private readonly heap: Cursor[] = []
  private horizon = 0
  private count = 0

  /** Adds plan entry `entry` (its index in the plan) with its scenario starting at `offset`. */
  add(entry: number, scenario: SortedScenario, offset: number): void {
    const series = [scenario.follows, scenario.posts, scenario.sessions]
    series.forEach((events, rank) => {
      if (events.length > 0) this.push({ entry, rank, base: offset, i: 0, events })
      this.count += events.length
    })
    this.horizon = Math.max(this.horizon, offset + scenario.span_ms)
  }

  /** Plan time at which the last event (or session) of all entries added so far ends. */
  get endOffset(): number {
    return this.horizon
  }

  /** Events added so far (dispatched or not). */
  get total(): number {
    return this.count
  }

  /** Absolute time of the next event, or undefined when none is left. */
  peekAt(): number | undefined {
    const top = this.heap[0]
    return top ? at(top) : undefined
  }

  pop(): PlanEvent | undefined {
    const top = this.heap[0]
    if (!top) return undefined
    const e = top.events[top.i]!
    const event = toEvent(top, e)
    top.i++
    if (top.i < top.events.length) this.siftDown(0)
    else {
      const last = this.heap.pop()!
      if (this.heap.length > 0) {
        this.heap[0] = last
        this.siftDown(0)
      }
    }
    return event
  }

  private push(c: Cursor): void {
    const h = this.heap
    h.push(c)
    let i = h.length - 1
    while (i > 0) {
      const parent = (i - 1) >> 1
      if (!before(h[i]!, h[parent]!)) break
      ;[h[i], h[parent]] = [h[parent]!, h[i]!]
      i = parent
    }
  }

  private siftDown(i: number): void {
    const h = this.heap
    for (;;) {
      const l = 2 * i + 1
      const r = l + 1
      let min = i
      if (l < h.length && before(h[l]!, h[min]!)) min = l
      if (r < h.length && before(h[r]!, h[min]!)) min = r
      if (min === i) return
      ;[h[i], h[min]] = [h[min]!, h[i]!]
      i = min
    }
  }
}

function toEvent(c: Cursor, e: FollowEvent | PostEvent | SessionEvent): PlanEvent {
  const abs = c.base + e.offset_ms
  if (c.rank === 0) {
    const f = e as FollowEvent
    return { kind: 'follow', at: abs, entry: c.entry, user_id: f.user_id, subject_id: f.subject_id }
  }
  if (c.rank === 1) return { kind: 'post', at: abs, entry: c.entry, user_id: e.user_id }
  const s = e as SessionEvent
  return {
    kind: 'session',
    at: abs,
    entry: c.entry,
    user_id: s.user_id,
    duration_ms: s.duration_ms,
  }
}

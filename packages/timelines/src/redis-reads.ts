// Redis replies read into list slices: a SLICES row, and the HOME script's one-string reply.
// A home read's reply holds the timeline, the reader's own list and every followed celebrity's
// list; most celebrity lists add nothing to a page (empty down to the floor, or passed over by
// their heads). The reply is walked list by list in place, and such a list costs no objects.
import { READY, TRUNCATED, WARMING_T } from './member.ts'
import { mergeSlices, sliceOf, type Slice } from './slices.ts'
import type { AuthorMembers } from './types.ts'

/** A list's state as read: materialised or not, and its horizon when it has one. */
export type Head = { ready: boolean; ghost: string | undefined }

/** One list as read: its state and horizon, and its slice. */
export type Read = { head: Head; slice: Slice }

/** A materialised list with nothing in range and no horizon: it changes no merge. */
const NOTHING: Read = Object.freeze({
  head: Object.freeze({ ready: true, ghost: undefined }),
  slice: Object.freeze({ members: Object.freeze([]), ghost: undefined }),
})

/** Whether a list whose sentinel is `state` is materialised. */
const isReady = (state: string): boolean => state === READY || state === TRUNCATED

/** A list's horizon: its lowest member when its sentinel says it has one ('' when none was read). */
const horizonOf = (state: string, lowest: string): string | undefined =>
  (state === TRUNCATED || state === WARMING_T) && lowest ? lowest : undefined

/** A SLICES row: sentinel, lowest member, then the range. */
export function parseSlice(row: readonly string[], count: number): Read {
  const [state = '', lowest = '', ...range] = row
  const ghost = horizonOf(state, lowest)
  return { head: { ready: isReady(state), ghost }, slice: sliceOf(range, count, ghost) }
}

/** Separators of the HOME reply: between lists, and between a list's three fields. */
const LIST_SEP = '\x1d'
const FIELD_SEP = '\x1e'

/**
 * The HOME reply's lists in its order: the timeline, the own list, then one per celebrity (none
 * when the timeline is not materialised). Each is sentinel, FIELD_SEP, horizon, FIELD_SEP, the
 * range ('\n' between members); an empty horizon is one that cannot cut this range (see HOME),
 * so the slice is read as having none.
 */
export function homeReads(reply: string, count: number): Read[] {
  const out: Read[] = []
  for (let at = 0; at <= reply.length;) {
    let end = reply.indexOf(LIST_SEP, at)
    if (end < 0) end = reply.length
    out.push(homeList(reply, at, end, count))
    at = end + 1
  }
  return out
}

function homeList(reply: string, start: number, end: number, count: number): Read {
  const a = reply.indexOf(FIELD_SEP, start)
  const b = a < 0 ? -1 : reply.indexOf(FIELD_SEP, a + 1)
  if (a < 0 || b < 0 || b >= end)
    throw new Error('the HOME script answered a list without its fields')
  const state = reply.slice(start, a)
  const ready = isReady(state)
  const ghost = horizonOf(state, reply.slice(a + 1, b))
  if (b + 1 === end && ready && ghost === undefined) return NOTHING
  const rows = b + 1 === end ? [] : reply.slice(b + 1, end).split('\n')
  return { head: { ready, ghost }, slice: sliceOf(rows, count, ghost) }
}

/** Authors' lists merged into one page; the unmaterialised ones are missing. */
export function authorPage(
  read: readonly Read[],
  authors: readonly string[],
  count: number,
  floor?: string,
): AuthorMembers {
  const slices: Slice[] = []
  const missing: string[] = []
  for (let i = 0; i < read.length; i++) {
    const { head, slice } = read[i]!
    if (!head.ready) missing.push(authors[i]!)
    else if (slice !== NOTHING.slice) slices.push(slice)
  }
  const { members, complete } = mergeSlices(slices, count, floor)
  return { members, complete: complete && !missing.length, missing }
}

// Redis replies read into list slices: a SLICES row, and the HOME script's one-string reply.
// A home read's reply holds the timeline, the reader's own list and every followed celebrity's
// list; most celebrity lists add nothing to a page (empty down to the floor, or passed over by
// their heads). The reply is walked list by list in place, and such a list costs no objects.
import { isGhost, READY, TRUNCATED, WARMING_T } from './member.ts'
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
 * The HOME reply's lists in its order: the timeline (its rows read beside the script), the own
 * list, then one per celebrity (none when the timeline is not materialised). Each is sentinel,
 * FIELD_SEP, horizon, FIELD_SEP, the range ('\n' between members); an empty horizon is one that
 * cannot cut this range (see HOME), so the slice is read as having none. With copies, each
 * celebrity's part is AS_COPIED or the list read whole with its version (see copyList).
 */
export function homeReads(
  reply: string,
  count: number,
  timelineRows: string[],
  copies?: CopyReads,
): Read[] {
  const out: Read[] = []
  for (let at = 0; at <= reply.length;) {
    let end = reply.indexOf(LIST_SEP, at)
    if (end < 0) end = reply.length
    if (!out.length) out.push(timelineList(reply, at, end, count, timelineRows))
    else if (copies && out.length >= 2)
      out.push(copyList(reply, at, end, count, out.length - 2, copies, out[0]!))
    else out.push(homeList(reply, at, end, count))
    at = end + 1
  }
  return out
}

/**
 * The timeline: its state from the reply, its rows read beside it (cut in place); its horizon
 * from the reply on a later page, else the rows' last when that is a ghost (as HOME reads others).
 */
function timelineList(
  reply: string,
  start: number,
  end: number,
  count: number,
  rows: string[],
): Read {
  const { head } = homeList(reply, start, end, count)
  const last = rows.at(-1)
  const ghost = head.ghost ?? (last !== undefined && isGhost(last) ? last : undefined)
  return { head: { ready: head.ready, ghost }, slice: sliceOf(rows, count, ghost) }
}

/**
 * A process's copy of a materialised celebrity list's top, as HOME read it whole: kept while the
 * list's version is the same, so that a read asks whether it still holds instead of reading it.
 * Never changed once made (a read in flight keeps the copy it named).
 */
export interface ListCopy {
  version: string
  /** READY or TRUNCATED. */
  state: string
  /** The rows below the sentinel, newest first: at most `count + 1` (the ghost may end them). */
  rows: readonly string[]
  /** The page size it was read for: it serves reads of this size or less. */
  count: number
}

/**
 * A HOME call with copies: the copies named (by celebrity, undefined for none), and where new
 * ones go.
 */
export interface CopyReads {
  named: readonly (ListCopy | undefined)[]
  keep(index: number, copy: ListCopy): void
  /** Lists answered from their copies (counted as the reply is read). */
  used: number
}

/** What HOME answers for a list whose version is the copy's. */
const AS_COPIED = '\x1f'

/**
 * A celebrity list of a HOME reply with copies: the copy named, or the list read whole (kept as a
 * copy when it has a version); either cut to the page's floor as HOME would have read it.
 */
function copyList(
  reply: string,
  start: number,
  end: number,
  count: number,
  index: number,
  copies: CopyReads,
  timeline: Read,
): Read {
  const floor =
    timeline.slice.members.length === count ? timeline.slice.members[count - 1] : undefined
  if (end === start + 1 && reply[start] === AS_COPIED) {
    const named = copies.named[index]
    if (!named) throw new Error('the HOME script answered a copy for a list without one')
    copies.used++
    return fromCopy(named, count, floor)
  }
  const a = reply.indexOf(FIELD_SEP, start)
  const b = a < 0 ? -1 : reply.indexOf(FIELD_SEP, a + 1)
  if (a < 0 || b < 0 || b >= end)
    throw new Error('the HOME script answered a list without its fields')
  const state = reply.slice(start, a)
  if (!isReady(state)) return { head: { ready: false, ghost: undefined }, slice: EMPTY }
  const version = reply.slice(a + 1, b)
  const rows = b + 1 === end ? [] : reply.slice(b + 1, end).split('\n')
  const copy: ListCopy = { version, state, rows, count }
  if (version) copies.keep(index, copy)
  return fromCopy(copy, count, floor)
}

const EMPTY: Slice = Object.freeze({ members: Object.freeze([]), ghost: undefined })

/**
 * A list's read from a copy of its top, exactly as HOME reads it on a first page: its top
 * `count + 1` rows down to the floor (inclusive), its horizon the ghost when that range ends in
 * it. The copy's rows stay as they are.
 */
export function fromCopy(copy: ListCopy, count: number, floor: string | undefined): Read {
  const { rows } = copy
  const max = Math.min(rows.length, count + 1)
  let n = 0
  while (n < max && (floor === undefined || rows[n]! >= floor)) n++
  if (n === 0) return NOTHING
  const last = rows[n - 1]!
  const ghost = copy.state === TRUNCATED && isGhost(last) ? last : undefined
  return { head: { ready: true, ghost }, slice: sliceOf(rows.slice(0, n), count, ghost) }
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

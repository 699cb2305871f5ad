// The read side's merge: the reader's stored timeline and the followed celebrities' recent items
// stand in for the stock's "followed accounts" query, then own items join under the stock's page
// rules. Kept equal to the server's mergeTimeline (tests compare them), without depending on the
// server package.
import { memberCursor, SEP } from './member.ts'
import type { TimelineItem } from './types.ts'

/** feed_item columns as the server's Postgres timeline reads them. */
export interface FeedRow {
  uri: string
  cid: string
  postUri: string
  sortAt: string
}

export function itemFromFeedRow(row: FeedRow): TimelineItem {
  const item: TimelineItem = { uri: row.postUri, sortAt: row.sortAt, cid: row.cid }
  if (row.uri !== row.postUri) item.repost = row.uri
  return item
}

export function feedRowFromItem(item: TimelineItem): FeedRow {
  return { uri: item.repost ?? item.uri, cid: item.cid, postUri: item.uri, sortAt: item.sortAt }
}

/** The stock's cursor for a feed item: `<epoch-ms of sortAt>__<cid>`. */
export function cursorOf(item: TimelineItem): string {
  return `${new Date(item.sortAt).getTime()}__${item.cid}`
}

/** Own posts always allowed into a page, even when followed accounts could fill it. */
const OWN_POSTS_FLOOR = 10

export interface MergeInput {
  /** The reader's stored timeline after the cursor, as members, newest first (limit + 1). */
  timeline: readonly string[]
  /** Followed celebrities' members after the cursor, newest first (limit + 1). */
  celebrities: readonly string[]
  /** The reader's own members after the cursor, newest first (limit + 1). */
  own: readonly string[]
  limit: number
}

export interface MergedPage {
  /** The page's members, newest first. */
  members: string[]
  /** The stock's cursor, or '' when no further page exists. */
  cursor: string
}

/**
 * One GetTimeline page, merged on members as the lists hold them: member order is (sortAt, cid)
 * order (member.ts), so nothing is decoded but the page's own items, later, by whoever answers.
 * Followed items are the union of the timeline and the celebrity items (an item in both counts
 * once), cut to `limit + 1` like the stock's query. Own items fill the slots followed items leave
 * empty, at least OWN_POSTS_FLOOR of them regardless; the page has a cursor when the merge
 * overflowed, or when own items were cut by their cap. Own items are not deduplicated against
 * followed ones: a reader following themselves sees them twice in the stock too.
 */
export function mergeHome(input: MergeInput): MergedPage {
  const { limit } = input
  const followed = union(input.timeline, input.celebrities, limit + 1)
  const ownLimit = Math.max(
    Math.min(limit, OWN_POSTS_FLOOR),
    limit - Math.min(followed.length, limit),
  )
  const own = input.own.length > ownLimit ? input.own.slice(0, ownLimit) : input.own
  // Both newest first: a merge, not a sort. The stock sorts on (sortAt, cid) only and keeps ties
  // in input order, followed before own; so does this.
  const size = Math.min(followed.length + own.length, Math.max(limit, 0))
  const members: string[] = new Array<string>(size)
  let i = 0
  let j = 0
  for (let k = 0; k < size; k++) {
    const a = followed[i]
    const b = own[j]
    if (b === undefined || (a !== undefined && (a >= b || sameKey(a, b)))) {
      members[k] = a!
      i++
    } else {
      members[k] = b
      j++
    }
  }
  const more = followed.length + own.length > limit || input.own.length > ownLimit
  const last = members.at(-1)
  if (last === undefined) return { members: [], cursor: '' }
  return { members, cursor: more ? memberCursor(last) : '' }
}

/** Whether two members have the same (sortAt, cid): the same text up to the second SEP. */
function sameKey(a: string, b: string): boolean {
  const end = b.indexOf(SEP, b.indexOf(SEP) + 1)
  if (a.length <= end || a.charCodeAt(end) !== SEP_CODE) return false
  for (let k = 0; k < end; k++) if (a.charCodeAt(k) !== b.charCodeAt(k)) return false
  return true
}

const SEP_CODE = SEP.charCodeAt(0)

/** The newest `max` of two descending member lists, an item in both once. */
function union(a: readonly string[], b: readonly string[], max: number): readonly string[] {
  if (b.length === 0) return a.length > max ? a.slice(0, max) : a
  const out: string[] = []
  let i = 0
  let j = 0
  while (out.length < max && (i < a.length || j < b.length)) {
    const x = a[i]
    const y = b[j]
    if (y === undefined || (x !== undefined && x > y)) {
      out.push(x!)
      i++
    } else if (x === undefined || y > x) {
      out.push(y)
      j++
    } else {
      // The same item in both (a celebrity's post fanned out before it crossed the threshold).
      out.push(x)
      i++
      j++
    }
  }
  return out
}

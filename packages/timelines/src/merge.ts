// The read side's merge: the reader's stored timeline and the followed celebrities' recent items
// stand in for the stock's "followed accounts" query, then own items join under the stock's page
// rules. Kept equal to the server's mergeTimeline (tests compare them), without depending on the
// server package.
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

/** (sortAt desc, cid desc) on the strings, ties kept in input order: the stock's merge sort. */
export function newestFirst(a: TimelineItem, b: TimelineItem): number {
  if (a.sortAt !== b.sortAt) return a.sortAt > b.sortAt ? -1 : 1
  if (a.cid !== b.cid) return a.cid > b.cid ? -1 : 1
  return 0
}

/** Own posts always allowed into a page, even when followed accounts could fill it. */
const OWN_POSTS_FLOOR = 10

export interface MergeInput {
  /** The reader's stored timeline after the cursor: `page(reader, { limit: limit + 1 })`. */
  timeline: readonly TimelineItem[]
  /** Followed celebrities' items after the cursor: `authorRecent(celebs, { limit: limit + 1 })`. */
  celebrities: readonly TimelineItem[]
  /** The reader's own feed items after the cursor, `limit + 1` of them (Postgres ownItems). */
  own: readonly TimelineItem[]
  limit: number
}

export interface MergedPage {
  items: TimelineItem[]
  /** The stock's cursor, or '' when no further page exists. */
  cursor: string
}

/**
 * One GetTimeline page. Followed items are the union of the timeline and the celebrity items
 * (an item in both counts once), cut to `limit + 1` like the stock's query. Own items fill the
 * slots followed items leave empty, at least OWN_POSTS_FLOOR of them regardless; the page has a
 * cursor when the merge overflowed, or when own items were cut by their cap. Own items are not
 * deduplicated against followed ones: a reader following themselves sees them twice in the
 * stock too.
 */
export function mergePages(input: MergeInput): MergedPage {
  const { limit } = input
  const followed = mergeFollowed(input.timeline, input.celebrities).slice(0, limit + 1)
  const ownLimit = Math.max(
    Math.min(limit, OWN_POSTS_FLOOR),
    limit - Math.min(followed.length, limit),
  )
  const merged = [...followed, ...input.own.slice(0, ownLimit)].sort(newestFirst)
  const items = merged.slice(0, Math.max(limit, 0))
  const last = items.at(-1)
  if (!last) return { items: [], cursor: '' }
  const more = merged.length > limit || input.own.length > ownLimit
  return { items, cursor: more ? cursorOf(last) : '' }
}

function mergeFollowed(
  timeline: readonly TimelineItem[],
  celebrities: readonly TimelineItem[],
): TimelineItem[] {
  if (celebrities.length === 0) return [...timeline]
  // Both inputs are newest first and each holds an item once: merge them, keeping one of an item
  // found in both (a celebrity's post fanned out before it crossed the threshold). Items are
  // compared by their fields, not re-encoded into members: this runs on every read.
  const out: TimelineItem[] = []
  let i = 0
  let j = 0
  while (i < timeline.length || j < celebrities.length) {
    const a = timeline[i]
    const b = celebrities[j]
    const order = !a ? 1 : !b ? -1 : newestFirst(a, b) || sameOrder(a, b)
    if (order === 0) j++ // the same item in both: keep the timeline's
    out.push(order > 0 ? b! : a!)
    if (order > 0) j++
    else i++
  }
  return out
}

/** Ties on (sortAt, cid): the member order (post, then repost, descending); 0 if the same item. */
function sameOrder(a: TimelineItem, b: TimelineItem): number {
  if (a.uri !== b.uri) return a.uri > b.uri ? -1 : 1
  const ra = a.repost ?? ''
  const rb = b.repost ?? ''
  return ra === rb ? 0 : ra > rb ? -1 : 1
}

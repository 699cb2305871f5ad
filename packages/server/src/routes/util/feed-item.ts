// feed_item rows as the author feed and timeline answer them: the post, and the repost when the
// item is one. The stock fills no other AuthorFeedItem/TimelineFeedItem field; the AppView's
// hydration reads none.
import { encodeTimeKey } from './pagination.ts'

export interface FeedItemRow {
  uri: string
  cid: string
  postUri: string
  sortAt: string
}

export interface FeedItemOut {
  uri: string
  repost: string
}

export function feedItemFromRow(row: FeedItemRow): FeedItemOut {
  return { uri: row.postUri, repost: row.uri === row.postUri ? '' : row.uri }
}

export function feedItemCursor(row: FeedItemRow): string {
  return encodeTimeKey(row.sortAt, row.cid)
}

/** (sortAt desc, cid desc), the order of the feed_item cursor indexes. */
export function newestFirst(a: FeedItemRow, b: FeedItemRow): number {
  if (a.sortAt !== b.sortAt) return a.sortAt > b.sortAt ? -1 : 1
  if (a.cid !== b.cid) return a.cid > b.cid ? -1 : 1
  return 0
}

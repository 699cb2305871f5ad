// The home timeline as the stock builds it in SQL: the followed accounts' feed items fanned in
// at read time, merged with the viewer's own. A Redis fan-out may serve the hot path instead;
// this stays the reference and the fallback, so it takes only a db and the request.
import type { Kysely } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'
import {
  feedItemCursor,
  feedItemFromRow,
  newestFirst,
  type FeedItemOut,
  type FeedItemRow,
} from './feed-item.ts'
import { before, decodeTimeKey, type TimeKey } from './pagination.ts'
import { pageSize } from './stock-cursors.ts'

export interface TimelineRequest {
  actorDid: string
  limit: number
  cursor: string
}

export interface TimelinePage {
  items: FeedItemOut[]
  cursor: string
}

/** Own posts always allowed into a page, even when followed accounts could fill it. */
const OWN_POSTS_FLOOR = 10

export async function timelineFromPostgres(
  db: Kysely<DatabaseSchema>,
  req: TimelineRequest,
): Promise<TimelinePage> {
  const at = decodeTimeKey(req.cursor)
  const limit = pageSize(req.limit)
  const [followed, own] = await Promise.all([
    followedItems(db, req.actorDid, at, limit + 1),
    ownItems(db, req.actorDid, at, limit + 1),
  ])
  return mergeTimeline(followed, own, limit)
}

/** Feed items of everyone the actor follows, newest first (walks feed_item_originator_cursor_idx). */
export function followedItems(
  db: Kysely<DatabaseSchema>,
  actorDid: string,
  at: TimeKey | undefined,
  rows: number,
): Promise<FeedItemRow[]> {
  return db
    .selectFrom('feed_item')
    .innerJoin('follow', 'follow.subjectDid', 'feed_item.originatorDid')
    .where('follow.creator', '=', actorDid)
    .$call((qb) => (at ? qb.where(before('feed_item.sortAt', 'feed_item.cid', at)) : qb))
    .select(['feed_item.uri', 'feed_item.cid', 'feed_item.postUri', 'feed_item.sortAt'])
    .orderBy('feed_item.sortAt', 'desc')
    .orderBy('feed_item.cid', 'desc')
    .limit(rows)
    .execute()
}

/** The actor's own feed items (posts and reposts), newest first. */
export function ownItems(
  db: Kysely<DatabaseSchema>,
  actorDid: string,
  at: TimeKey | undefined,
  rows: number,
): Promise<FeedItemRow[]> {
  return db
    .selectFrom('feed_item')
    .where('feed_item.originatorDid', '=', actorDid)
    .$call((qb) => (at ? qb.where(before('feed_item.sortAt', 'feed_item.cid', at)) : qb))
    .select(['feed_item.uri', 'feed_item.cid', 'feed_item.postUri', 'feed_item.sortAt'])
    .orderBy('feed_item.sortAt', 'desc')
    .orderBy('feed_item.cid', 'desc')
    .limit(rows)
    .execute()
}

/**
 * Merges one page the way the stock does. Own items fill the slots followed accounts leave
 * empty, and at least OWN_POSTS_FLOOR of them get in regardless. The page carries a cursor when
 * the merge overflowed it, and also when own items were cut by their cap even though the merge
 * did not overflow (the extra own row proves another page exists). Both inputs hold up to
 * `limit + 1` rows.
 */
export function mergeTimeline(
  followed: FeedItemRow[],
  own: FeedItemRow[],
  limit: number,
): TimelinePage {
  const ownLimit = Math.max(
    Math.min(limit, OWN_POSTS_FLOOR),
    limit - Math.min(followed.length, limit),
  )
  const merged = [...followed, ...own.slice(0, ownLimit)].sort(newestFirst)
  const items = merged.slice(0, limit)
  const last = items.at(-1)
  if (!last) return { items: [], cursor: '' }
  const more = merged.length > limit || own.length > ownLimit
  return { items: items.map(feedItemFromRow), cursor: more ? feedItemCursor(last) : '' }
}

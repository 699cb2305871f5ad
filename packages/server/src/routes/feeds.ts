import { Code, ConnectError } from '@connectrpc/connect'
import type { ExpressionBuilder, Kysely } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'
import { FeedType } from '@openplane/proto'
import type { HomeTimelineReader, RouteContext, Routes } from './context.ts'
import { isDid } from './util/at-uri.ts'
import { feedItemBytes, type FeedItemBytes } from '../wire/feed-items.ts'
import { feedItemCursor, feedItemFromRow } from './util/feed-item.ts'
import { before, decodeTimeKey, encodeTimeKey, page, type TimeKey } from './util/pagination.ts'
import { pageSize } from './util/stock-cursors.ts'
import {
  timelineFromPostgres,
  type TimelinePage,
  type TimelineRequest,
} from './util/timeline-sql.ts'

const REFERENCE_LIST = 'app.bsky.graph.defs#referencelist'

type AuthorFeedEb = ExpressionBuilder<DatabaseSchema, 'feed_item' | 'post'>

export default (ctx: RouteContext): Routes => ({
  async getAuthorFeed(req) {
    const at = decodeTimeKey(req.cursor)
    const limit = pageSize(req.limit)
    const rows = await ctx.db
      .selectFrom('feed_item')
      .innerJoin('post', 'post.uri', 'feed_item.postUri')
      .where('feed_item.originatorDid', '=', req.actorDid)
      .$call((qb) => {
        const filter = feedTypeFilter(req.actorDid, req.feedType)
        return filter ? qb.where(filter) : qb
      })
      // The stock pages author feeds with the or-form keyset.
      .$call((qb) => (at ? qb.where(before('feed_item.sortAt', 'feed_item.cid', at, true)) : qb))
      .select(['feed_item.uri', 'feed_item.cid', 'feed_item.postUri', 'feed_item.sortAt'])
      .orderBy('feed_item.sortAt', 'desc')
      .orderBy('feed_item.cid', 'desc')
      .limit(limit + 1)
      .execute()
    const { items, cursor } = page(rows, limit, feedItemCursor)
    return { items: items.map(feedItemFromRow), cursor }
  },

  getTimeline: (req) => timelinePage(ctx, req),

  async getListFeed(req) {
    const at = decodeTimeKey(req.cursor)
    const limit = pageSize(req.limit)
    const isReference = (await listPurpose(ctx.db, req.listUri)) === REFERENCE_LIST
    // Each member's newest posts by its own index range (post_creator_cursor_idx), at most one
    // page each, then merged: the stock's join reads every post of every member first.
    const rows = await ctx.db
      .selectFrom('list_item as li')
      .innerJoinLateral(
        (eb) =>
          eb
            .selectFrom('post')
            .whereRef('post.creator', '=', 'li.subjectDid')
            .$call((qb) => (at ? qb.where(before('post.sortAt', 'post.cid', at)) : qb))
            .select(['post.uri', 'post.cid', 'post.sortAt'])
            .orderBy('post.sortAt', 'desc')
            .orderBy('post.cid', 'desc')
            .limit(limit + 1)
            .as('p'),
        (join) => join.onTrue(),
      )
      .where('li.listUri', '=', req.listUri)
      // Members who opted out of a reference list drop out of its feed.
      .$if(isReference, (qb) =>
        qb.where(({ not, exists, selectFrom }) =>
          not(
            exists(
              selectFrom('reference_list_opt_out')
                .select('reference_list_opt_out.uri')
                .whereRef('reference_list_opt_out.creator', '=', 'li.subjectDid')
                .where('reference_list_opt_out.subjectUri', '=', req.listUri),
            ),
          ),
        ),
      )
      .select(['p.uri', 'p.cid', 'p.sortAt'])
      .orderBy('p.sortAt', 'desc')
      .orderBy('p.cid', 'desc')
      .limit(limit + 1)
      .execute()
    const { items, cursor } = page(rows, limit, (r) => encodeTimeKey(r.sortAt, r.cid))
    return { items: items.map((r) => ({ uri: r.uri, cid: r.cid })), cursor }
  },
})

/**
 * One GetTimeline page: from the fan-out timelines when they can answer it, else from Postgres.
 * The exclude flags are ignored, as the stock ignores them. Shared by the Connect route and the
 * direct lane (direct.ts), which answer it alike.
 */
export async function timelinePage(ctx: RouteContext, req: TimelineRequest): Promise<TimelinePage> {
  return timelineFrom(
    ctx,
    req,
    (t, ...page) => t.read(...page),
    (page) => page,
  )
}

/** The page with its items as bytes, for the direct lane's frame (../wire/timeline.ts). */
export async function timelineAnswer(
  ctx: RouteContext,
  req: TimelineRequest,
): Promise<{ items: FeedItemBytes; cursor: string }> {
  return timelineFrom(
    ctx,
    req,
    (t, ...page) => t.readItems(...page),
    (page) => ({ items: feedItemBytes(page.items), cursor: page.cursor }),
  )
}

/** A page from the fan-out timelines when they can answer it, else from Postgres. */
async function timelineFrom<T>(
  ctx: RouteContext,
  req: TimelineRequest,
  fast: (
    timelines: HomeTimelineReader,
    reader: string,
    limit: number,
    before: TimeKey | undefined,
  ) => Promise<T | undefined>,
  slow: (page: TimelinePage) => T,
): Promise<T> {
  // A reader is a DID; anything else is the caller's mistake, not an empty timeline.
  if (!isDid(req.actorDid)) throw new ConnectError('actorDid is not a DID', Code.InvalidArgument)
  const limit = pageSize(req.limit)
  const got =
    limit > 0 && ctx.timelines
      ? await fast(ctx.timelines, req.actorDid, limit, decodeTimeKey(req.cursor))
      : undefined
  return got ?? slow(await timelineFromPostgres(ctx.db, req))
}

async function listPurpose(
  db: Kysely<DatabaseSchema>,
  listUri: string,
): Promise<string | undefined> {
  const row = await db
    .selectFrom('list')
    .where('uri', '=', listUri)
    .select('purpose')
    .executeTakeFirst()
  return row?.purpose
}

/** The stock's author-feed filters; unspecified (and unknown) types mean posts, reposts and replies. */
function feedTypeFilter(actorDid: string, feedType: FeedType) {
  switch (feedType) {
    case FeedType.POSTS_WITH_MEDIA:
      return (eb: AuthorFeedEb) =>
        eb.and([
          eb('feed_item.type', '=', 'post'),
          eb.or([
            eb.exists(
              eb
                .selectFrom('post_embed_image')
                .select('post_embed_image.postUri')
                .whereRef('post_embed_image.postUri', '=', 'feed_item.postUri'),
            ),
            eb.exists(
              eb
                .selectFrom('post_embed_gallery_image')
                .select('post_embed_gallery_image.postUri')
                .whereRef('post_embed_gallery_image.postUri', '=', 'feed_item.postUri'),
            ),
          ]),
        ])
    case FeedType.POSTS_WITH_VIDEO:
      return (eb: AuthorFeedEb) =>
        eb.and([
          eb('feed_item.type', '=', 'post'),
          eb.exists(
            eb
              .selectFrom('post_embed_video')
              .select('post_embed_video.postUri')
              .whereRef('post_embed_video.postUri', '=', 'feed_item.postUri'),
          ),
        ])
    case FeedType.POSTS_NO_REPLIES:
      return (eb: AuthorFeedEb) =>
        eb.or([eb('post.replyParent', 'is', null), eb('feed_item.type', '=', 'repost')])
    case FeedType.POSTS_AND_AUTHOR_THREADS:
      // Replies count when they sit in a thread the author started (a like pattern, as the stock's).
      return (eb: AuthorFeedEb) =>
        eb.or([
          eb('feed_item.type', '=', 'repost'),
          eb('post.replyParent', 'is', null),
          eb('post.replyRoot', 'like', `at://${actorDid}/%`),
        ])
    default:
      return undefined
  }
}

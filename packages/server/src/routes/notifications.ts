import { Timestamp, type PartialMessage } from '@bufbuild/protobuf'
import { sql, type ExpressionBuilder, type Kysely } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'
import { NotificationInclude, type NotificationPreferences } from '@openplane/proto'
import type { RouteContext, Routes } from './context.ts'
import { page } from './util/pagination.ts'
import { decodeIsoCursor, encodeIsoCursor, pageSize } from './util/stock-cursors.ts'

/** The stash namespace the AppView stores notification preferences under (record key `self`). */
const PREFERENCES_NAMESPACE = 'app.bsky.notification.defs#preferences'

export default (ctx: RouteContext): Routes => ({
  // Paged by sortAt alone (an ISO cursor), as the stock pages: notifications sharing the
  // boundary instant with the last row of a page do not appear on the next one.
  async getNotifications(req) {
    const at = decodeIsoCursor(req.cursor)
    const limit = pageSize(req.limit)
    const rows = await ctx.db
      .selectFrom('notification as notif')
      .where('notif.did', '=', req.actorDid)
      // Notifications about a record that is gone are hidden.
      .where((eb) =>
        eb.or([
          eb('notif.reasonSubject', 'is', null),
          eb.exists(
            eb
              .selectFrom('record as subject')
              .select('subject.uri')
              .whereRef('subject.uri', '=', 'notif.reasonSubject'),
          ),
        ]),
      )
      .$if(req.priority, (qb) => qb.where((eb) => eb.exists(followsAuthor(eb, req.actorDid))))
      .$call((qb) => (at ? qb.where('notif.sortAt', '<', at) : qb))
      .select([
        'notif.author',
        'notif.recordUri',
        'notif.reason',
        'notif.reasonSubject',
        'notif.sortAt',
      ])
      .select((eb) => followsAuthor(eb, req.actorDid).as('priority'))
      .orderBy('notif.sortAt', 'desc')
      .limit(limit + 1)
      .execute()
    const { items, cursor } = page(rows, limit, (r) => encodeIsoCursor(r.sortAt))
    return {
      notifications: items.map((n) => ({
        recipientDid: req.actorDid,
        uri: n.recordUri,
        reason: n.reason,
        reasonSubject: n.reasonSubject ?? '',
        timestamp: Timestamp.fromDate(new Date(n.sortAt)),
        priority: n.priority ?? false,
      })),
      cursor,
    }
  },

  async getNotificationSeen(req) {
    const lastSeen = await lastSeenNotifs(ctx.db, req.actorDid)
    return lastSeen === undefined ? {} : { timestamp: Timestamp.fromDate(new Date(lastSeen)) }
  },

  // Counts notifications newer than the last-seen time whose record and recipient are not
  // taken down; `> ''` when never seen keeps the (did, sortAt) index in play.
  async getUnreadNotificationCount(req) {
    const lastSeen = (await lastSeenNotifs(ctx.db, req.actorDid)) ?? ''
    const res = await ctx.db
      .selectFrom('notification')
      .innerJoin('actor', 'actor.did', 'notification.did')
      .innerJoin('record', 'record.uri', 'notification.recordUri')
      .where('record.takedownRef', 'is', null)
      .where('actor.takedownRef', 'is', null)
      .where('notification.did', '=', req.actorDid)
      .where('notification.sortAt', '>', lastSeen)
      .select(sql<number>`count(*)`.as('count'))
      .executeTakeFirst()
    return { count: Number(res?.count ?? 0) }
  },

  // Last-seen only moves forward.
  async updateNotificationSeen(req) {
    if (!req.timestamp) return {}
    const seen = req.timestamp.toDate().toISOString()
    await ctx.db
      .insertInto('actor_state')
      .values({ did: req.actorDid, lastSeenNotifs: seen, priorityNotifs: false })
      .onConflict((oc) =>
        oc.column('did').doUpdateSet({
          lastSeenNotifs: sql<string>`greatest(${sql.ref('actor_state.lastSeenNotifs')}, ${seen})`,
        }),
      )
      .execute()
    return {}
  },

  // One entry per requested did, empty where the actor stored no preferences.
  async getNotificationPreferences(req) {
    if (req.dids.length === 0) return { preferences: [] }
    const rows = await ctx.db
      .selectFrom('private_data')
      .where('actorDid', 'in', req.dids)
      .where('namespace', '=', PREFERENCES_NAMESPACE)
      .where('key', '=', 'self')
      .select(['actorDid', 'payload'])
      .execute()
    const byDid = new Map(rows.map((r) => [r.actorDid, r.payload]))
    return {
      preferences: req.dids.map((did) => {
        const payload = byDid.get(did)
        return payload === undefined ? {} : preferencesFromPayload(payload)
      }),
    }
  },
})

type NotifEb = ExpressionBuilder<
  DatabaseSchema & { notif: DatabaseSchema['notification'] },
  'notif'
>

/** Whether the recipient follows the notification's author: what makes a notification "priority". */
function followsAuthor(eb: NotifEb, actorDid: string) {
  return eb
    .selectFrom('follow')
    .select(sql<boolean>`${true}`.as('val'))
    .where('follow.creator', '=', actorDid)
    .whereRef('follow.subjectDid', '=', 'notif.author')
    .limit(1)
}

async function lastSeenNotifs(
  db: Kysely<DatabaseSchema>,
  did: string,
): Promise<string | undefined> {
  const row = await db
    .selectFrom('actor_state')
    .where('did', '=', did)
    .select('lastSeenNotifs')
    .executeTakeFirst()
  return row?.lastSeenNotifs
}

interface StoredPreference {
  include?: unknown
  list?: unknown
  push?: unknown
}

/**
 * The stored app.bsky.notification.defs#preferences JSON, with the raw entry alongside. Channels
 * default to enabled and `include` to all, as the stock reads them; a missing preference reads
 * as all defaults (the stock would fail on it).
 */
function preferencesFromPayload(payload: string): PartialMessage<NotificationPreferences> {
  const parsed: unknown = JSON.parse(payload)
  const stored = (typeof parsed === 'object' && parsed !== null ? parsed : {}) as Record<
    string,
    StoredPreference | undefined
  >
  const filterable = (key: string) => {
    const p = stored[key] ?? {}
    const include = p.include === 'follows' ? NotificationInclude.FOLLOWS : NotificationInclude.ALL
    return { include, ...channels(p) }
  }
  const plain = (key: string) => channels(stored[key] ?? {})
  return {
    entry: Buffer.from(payload),
    follow: filterable('follow'),
    like: filterable('like'),
    likeViaRepost: filterable('likeViaRepost'),
    mention: filterable('mention'),
    quote: filterable('quote'),
    reply: filterable('reply'),
    repost: filterable('repost'),
    repostViaRepost: filterable('repostViaRepost'),
    starterpackJoined: plain('starterpackJoined'),
    subscribedPost: plain('subscribedPost'),
    unverified: plain('unverified'),
    verified: plain('verified'),
  }
}

function channels(p: StoredPreference) {
  return {
    list: { enabled: typeof p.list === 'boolean' ? p.list : true },
    push: { enabled: typeof p.push === 'boolean' ? p.push : true },
  }
}

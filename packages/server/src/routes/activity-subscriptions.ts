// Activity subscriptions (private, stash-keyed): whom an actor subscribed to, by key, newest key
// first, and the actor's subscription to each of a batch of subjects.
import type { RouteContext, Routes } from './context.ts'
import { decodeKeyCursor, keyDesc } from './util/keyset.ts'
import { pageSize } from './util/stock-cursors.ts'
import { page } from './util/pagination.ts'

const SUBSCRIPTION_NAMESPACE = 'app.bsky.notification.defs#subjectActivitySubscription'

export default (ctx: RouteContext): Routes => ({
  async getActivitySubscriptionsByActorAndSubjects(req) {
    const { actorDid, subjectDids } = req
    if (subjectDids.length === 0) return { subscriptions: [] }
    const rows = await ctx.db
      .selectFrom('activity_subscription')
      .where('creator', '=', actorDid)
      .where('subjectDid', 'in', [...new Set(subjectDids)])
      .select(['subjectDid', 'key', 'post', 'reply'])
      .execute()
    const bySubject = new Map(rows.map((row) => [row.subjectDid, row]))
    // Every entry names the actor and namespace; a missing one has an empty key and subject.
    const subscriptions = subjectDids.map((did) => {
      const row = bySubject.get(did)
      return {
        actorDid,
        namespace: SUBSCRIPTION_NAMESPACE,
        key: row?.key ?? '',
        post: row?.post ? {} : undefined,
        reply: row?.reply ? {} : undefined,
        subjectDid: row?.subjectDid ?? '',
      }
    })
    return { subscriptions }
  },

  async getActivitySubscriptionDids(req) {
    const after = decodeKeyCursor(req.cursor)
    const limit = pageSize(req.limit)
    if (!limit) return { dids: [], cursor: '' }
    const query = ctx.db
      .selectFrom('activity_subscription')
      .where('activity_subscription.creator', '=', req.actorDid)
      .select(['activity_subscription.key', 'activity_subscription.subjectDid'])
    const rows = await keyDesc(query, {
      keyCol: 'activity_subscription.key',
      after,
      limit,
    }).execute()
    const { items, cursor } = page(rows, limit, (r) => r.key)
    return { dids: items.map((r) => r.subjectDid), cursor }
  },
})

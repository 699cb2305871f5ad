// Follows: who an actor follows / is followed by, newest first, and the follow uris between one
// actor and a batch of others. Follows of or by actors unknown to the index are left out of the
// lists (the stock joins `actor`).
import type { RouteContext, Routes } from './context.ts'
import { timeKeyDesc } from './util/keyset.ts'
import { pageSize } from './util/stock-cursors.ts'
import { graphFor } from './util/graph.ts'
import { decodeTimeKey, encodeTimeKey, page } from './util/pagination.ts'

export default (ctx: RouteContext): Routes => ({
  async getActorFollowsActors(req) {
    // The graph knows which targets are followed; only their uris need Postgres.
    const graph = graphFor(ctx, 'getActorFollowsActors')
    const targets = [...new Set(req.targetDids)].filter(
      (did) => !graph || graph.isFollowing(req.actorDid, did),
    )
    if (targets.length === 0) return { uris: req.targetDids.map(() => '') }
    const rows = await ctx.db
      .selectFrom('follow')
      .where('creator', '=', req.actorDid)
      .where('subjectDid', 'in', targets)
      .select(['uri', 'subjectDid'])
      .execute()
    const bySubject = new Map(rows.map((row) => [row.subjectDid, row.uri]))
    return { uris: req.targetDids.map((did) => bySubject.get(did) ?? '') }
  },

  async getFollowers(req) {
    const after = decodeTimeKey(req.cursor)
    const limit = pageSize(req.limit)
    if (!limit) return { followers: [], cursor: '' }
    const query = ctx.db
      .selectFrom('follow')
      .innerJoin('actor', 'actor.did', 'follow.creator')
      .where('follow.subjectDid', '=', req.actorDid)
      .select(['follow.uri', 'follow.cid', 'follow.creator', 'follow.subjectDid', 'follow.sortAt'])
    const rows = await timeKeyDesc(query, {
      timeCol: 'follow.sortAt',
      keyCol: 'follow.cid',
      after,
      limit,
    }).execute()
    const { items, cursor } = page(rows, limit, (r) => encodeTimeKey(r.sortAt, r.cid))
    return { followers: items.map(followInfo), cursor }
  },

  async getFollows(req) {
    const after = decodeTimeKey(req.cursor)
    const limit = pageSize(req.limit)
    if (!limit) return { follows: [], cursor: '' }
    const query = ctx.db
      .selectFrom('follow')
      .innerJoin('actor', 'actor.did', 'follow.subjectDid')
      .where('follow.creator', '=', req.actorDid)
      .select(['follow.uri', 'follow.cid', 'follow.creator', 'follow.subjectDid', 'follow.sortAt'])
    const rows = await timeKeyDesc(query, {
      timeCol: 'follow.sortAt',
      keyCol: 'follow.cid',
      after,
      limit,
    }).execute()
    const { items, cursor } = page(rows, limit, (r) => encodeTimeKey(r.sortAt, r.cid))
    return { follows: items.map(followInfo), cursor }
  },
})

function followInfo(row: { uri: string; creator: string; subjectDid: string }) {
  return { uri: row.uri, actorDid: row.creator, subjectDid: row.subjectDid }
}

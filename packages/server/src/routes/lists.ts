import { sql } from 'kysely'
import type { RouteContext, Routes } from './context.ts'
import { before, decodeTimeKey, encodeTimeKey, page } from './util/pagination.ts'
import { pageSize } from './util/stock-cursors.ts'

const REFERENCE_LIST = 'app.bsky.graph.defs#referencelist'

export default (ctx: RouteContext): Routes => ({
  async getActorLists(req) {
    const at = decodeTimeKey(req.cursor)
    const limit = pageSize(req.limit)
    const rows = await ctx.db
      .selectFrom('list')
      .where('list.creator', '=', req.actorDid)
      .$call((qb) => (at ? qb.where(before('list.sortAt', 'list.cid', at)) : qb))
      .select(['list.uri', 'list.cid', 'list.sortAt'])
      .orderBy('list.sortAt', 'desc')
      .orderBy('list.cid', 'desc')
      .limit(limit + 1)
      .execute()
    const { items, cursor } = page(rows, limit, (r) => encodeTimeKey(r.sortAt, r.cid))
    return { listUris: items.map((r) => r.uri), cursor }
  },

  // Members who opted out of a reference list are hidden, except from its owner, who sees them
  // flagged instead.
  async getListMembers(req) {
    const at = decodeTimeKey(req.cursor)
    const limit = pageSize(req.limit)
    const list = await ctx.db
      .selectFrom('list')
      .where('uri', '=', req.listUri)
      .select(['creator', 'purpose'])
      .executeTakeFirst()
    const isReference = list?.purpose === REFERENCE_LIST
    const isOwner = isReference && list.creator === req.viewerDid
    const rows = await ctx.db
      .selectFrom('list_item')
      .where('list_item.listUri', '=', req.listUri)
      .$if(isReference && !isOwner, (qb) =>
        qb.where(({ not, exists, selectFrom }) =>
          not(
            exists(
              selectFrom('reference_list_opt_out')
                .select('reference_list_opt_out.uri')
                .whereRef('reference_list_opt_out.creator', '=', 'list_item.subjectDid')
                .where('reference_list_opt_out.subjectUri', '=', req.listUri),
            ),
          ),
        ),
      )
      .$call((qb) => (at ? qb.where(before('list_item.sortAt', 'list_item.cid', at)) : qb))
      .select(['list_item.uri', 'list_item.cid', 'list_item.subjectDid', 'list_item.sortAt'])
      .orderBy('list_item.sortAt', 'desc')
      .orderBy('list_item.cid', 'desc')
      .limit(limit + 1)
      .execute()
    const { items, cursor } = page(rows, limit, (r) => encodeTimeKey(r.sortAt, r.cid))
    const optedOut = isOwner
      ? await optedOutOf(
          ctx,
          req.listUri,
          items.map((r) => r.subjectDid),
        )
      : new Set<string>()
    return {
      listitems: items.map((r) => ({
        uri: r.uri,
        did: r.subjectDid,
        subjectOptedOut: optedOut.has(r.subjectDid),
      })),
      cursor,
    }
  },

  // Aligned with the request: the actor's listitem uri per list, '' where not a member.
  async getListMembership(req) {
    if (req.listUris.length === 0) return { listitemUris: [] }
    const rows = await ctx.db
      .selectFrom('list_item')
      .where('subjectDid', '=', req.actorDid)
      .where('listUri', 'in', req.listUris)
      .select(['uri', 'listUri'])
      .execute()
    const byList = new Map(rows.map((r) => [r.listUri, r.uri]))
    return { listitemUris: req.listUris.map((uri) => byList.get(uri) ?? '') }
  },

  async getListCount(req) {
    const res = await ctx.db
      .selectFrom('list_item')
      .where('list_item.listUri', '=', req.listUri)
      .select(sql<number>`count(*)`.as('count'))
      .executeTakeFirst()
    return { count: Number(res?.count ?? 0) }
  },

  // Aligned with the request: the actor's opt-out uri per subject, '' where none. Opt-outs only
  // count against lists that are reference lists.
  async getReferencelistoptoutsByActorAndSubjects(req) {
    if (req.subjectUris.length === 0) return { uris: [] }
    const rows = await ctx.db
      .selectFrom('reference_list_opt_out')
      .innerJoin('list', 'list.uri', 'reference_list_opt_out.subjectUri')
      .where('reference_list_opt_out.creator', '=', req.actorDid)
      .where('reference_list_opt_out.subjectUri', 'in', req.subjectUris)
      .where('list.purpose', '=', REFERENCE_LIST)
      .select(['reference_list_opt_out.subjectUri', 'reference_list_opt_out.uri'])
      .execute()
    const bySubject = new Map(rows.map((r) => [r.subjectUri, r.uri]))
    return { uris: req.subjectUris.map((uri) => bySubject.get(uri) ?? '') }
  },
})

async function optedOutOf(
  ctx: RouteContext,
  listUri: string,
  dids: string[],
): Promise<Set<string>> {
  if (dids.length === 0) return new Set()
  const rows = await ctx.db
    .selectFrom('reference_list_opt_out')
    .where('creator', 'in', dids)
    .where('subjectUri', '=', listUri)
    .select('creator')
    .execute()
  return new Set(rows.map((r) => r.creator))
}

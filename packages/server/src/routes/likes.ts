// Likes: likes of a subject (newest first), an actor's likes, which of a batch of subjects an
// actor liked, and "liked by people you follow" per subject.
import { sql } from 'kysely'
import type { RouteContext, Routes } from './context.ts'
import { timeKeyDesc } from './util/keyset.ts'
import { pageSize } from './util/stock-cursors.ts'
import { decodeTimeKey, encodeTimeKey, page } from './util/pagination.ts'
import { viewerRows } from './util/viewer-state.ts'

// How far back into a subject's likes the known-likers search looks: a bounded scan per subject
// instead of intersecting every like with every follow.
const KNOWN_LIKERS_WINDOW = 500

export default (ctx: RouteContext): Routes => {
  // The cid of the subject ref is ignored, as in the stock: likes of any version count.
  const likesBySubject: NonNullable<Routes['getLikesBySubjectSorted']> = async (req) => {
    if (!req.subject?.uri) return { uris: [], cursor: '' }
    const after = decodeTimeKey(req.cursor)
    const limit = pageSize(req.limit)
    if (!limit) return { uris: [], cursor: '' }
    const query = ctx.db
      .selectFrom('like')
      .where('like.subject', '=', req.subject.uri)
      .select(['like.uri', 'like.cid', 'like.sortAt'])
    const rows = await timeKeyDesc(query, {
      timeCol: 'like.sortAt',
      keyCol: 'like.cid',
      after,
      limit,
    }).execute()
    const { items, cursor } = page(rows, limit, (r) => encodeTimeKey(r.sortAt, r.cid))
    return { uris: items.map((r) => r.uri), cursor }
  }

  return {
    getLikesBySubjectSorted: likesBySubject,
    // Deprecated alias of the sorted variant.
    getLikesBySubject: likesBySubject,

    async getKnownLikers(req) {
      const results = req.subjectUris.map((subjectUri) => ({
        subjectUri,
        count: 0,
        dids: [] as string[],
      }))
      if (req.limit <= 0 || results.length === 0) return { results }
      for (const row of await knownLikers(ctx, req.actorDid, req.subjectUris, req.limit)) {
        const result = results[Number(row.ordinal) - 1]
        if (!result) continue
        result.count = row.count
        result.dids.push(row.creator)
      }
      return { results }
    },

    async getLikesByActorAndSubjects(req) {
      if (req.refs.length === 0) return { uris: [] }
      const subjects = req.refs.map((ref) => ref.uri)
      const bySubject = await viewerRows(ctx.db, req.actorDid, 'like', subjects)
      return { uris: subjects.map((uri) => bySubject.get(uri)?.value ?? '') }
    },

    async getActorLikes(req) {
      const after = decodeTimeKey(req.cursor)
      const limit = pageSize(req.limit)
      if (!limit) return { likes: [], cursor: '' }
      const query = ctx.db
        .selectFrom('like')
        .where('like.creator', '=', req.actorDid)
        .select(['like.uri', 'like.cid', 'like.subject', 'like.sortAt'])
      const rows = await timeKeyDesc(query, {
        timeCol: 'like.sortAt',
        keyCol: 'like.cid',
        after,
        limit,
      }).execute()
      const { items, cursor } = page(rows, limit, (r) => encodeTimeKey(r.sortAt, r.cid))
      return { likes: items.map((r) => ({ uri: r.uri, subject: r.subject })), cursor }
    },
  }
}

interface KnownLikerRow {
  ordinal: string
  creator: string
  count: number
}

/**
 * Per subject (by 1-based position in the request): the viewer's followees among its most recent
 * likers, newest like first, at most `limit` of them, each row carrying the total found.
 */
async function knownLikers(
  ctx: RouteContext,
  viewer: string,
  subjects: string[],
  limit: number,
): Promise<KnownLikerRow[]> {
  const { rows } = await sql<KnownLikerRow>`
    with known as (
      select
        s.ordinal,
        recent.creator,
        count(*) over (partition by s.ordinal)::int as count,
        row_number() over (partition by s.ordinal order by recent."sortAt" desc) as rank
      from unnest(${subjects}::varchar[]) with ordinality as s(uri, ordinal)
      cross join lateral (
        select l.creator, l."sortAt"
        from "like" l
        where l.subject = s.uri
        order by l."sortAt" desc
        limit ${KNOWN_LIKERS_WINDOW}
      ) as recent
      join follow f on f."subjectDid" = recent.creator and f.creator = ${viewer}
    )
    select ordinal, creator, count from known
    where rank <= ${limit}
    order by ordinal, rank
  `.execute(ctx.db)
  return rows
}

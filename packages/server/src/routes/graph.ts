// Graph: "followed by people you follow" — for each target, the viewer's followees who follow it.
import { sql } from 'kysely'
import type { RouteContext, Routes } from './context.ts'

export default (ctx: RouteContext): Routes => ({
  // One round trip for the whole batch (the stock runs one query per target), each target keeping
  // the stock's query shape: the viewer's follows, semi-joined with the target's followers. The
  // order of `dids` is the plan's, as in the stock; the AppView shows the first few.
  async getFollowsFollowing(req) {
    const targets = req.targetDids
    if (targets.length === 0) return { results: [] }
    const { rows } = await sql<{ ordinal: string; did: string }>`
      select t.ordinal, known."subjectDid" as did
      from unnest(${targets}::varchar[]) with ordinality as t(did, ordinal)
      cross join lateral (
        select f."subjectDid" from follow f
        where f.creator = ${req.actorDid}
          and f."subjectDid" in (select g.creator from follow g where g."subjectDid" = t.did)
      ) as known
    `.execute(ctx.db)
    const results = targets.map((targetDid) => ({ targetDid, dids: [] as string[] }))
    for (const row of rows) results[Number(row.ordinal) - 1]?.dids.push(row.did)
    return { results }
  },
})

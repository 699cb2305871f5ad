// Graph: "followed by people you follow" — for each target, the viewer's followees who follow it.
import { sql } from 'kysely'
import type { RouteContext, Routes } from './context.ts'

export default (ctx: RouteContext): Routes => ({
  // One query for the whole batch (the stock runs one per target). Each probe goes through the
  // (creator, subjectDid) unique index from the viewer's followees to a target.
  async getFollowsFollowing(req) {
    const targets = req.targetDids
    if (targets.length === 0) return { results: [] }
    const unique = [...new Set(targets)]
    const { rows } = await sql<{ target: string; did: string }>`
      select theirs."subjectDid" as target, mine."subjectDid" as did
      from follow mine
      join follow theirs
        on theirs.creator = mine."subjectDid" and theirs."subjectDid" = any(${unique}::varchar[])
      where mine.creator = ${req.actorDid}
      order by mine."sortAt", mine.cid
    `.execute(ctx.db)
    const byTarget = new Map<string, string[]>()
    for (const row of rows) {
      const dids = byTarget.get(row.target) ?? []
      dids.push(row.did)
      byTarget.set(row.target, dids)
    }
    return {
      results: targets.map((targetDid) => ({ targetDid, dids: byTarget.get(targetDid) ?? [] })),
    }
  },
})

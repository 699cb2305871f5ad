// Sync: the latest repo rev indexed for an actor ('' when unknown).
import type { RouteContext, Routes } from './context.ts'

export default (ctx: RouteContext): Routes => ({
  async getLatestRev(req) {
    const row = await ctx.db
      .selectFrom('actor_sync')
      .where('did', '=', req.actorDid)
      .select('repoRev')
      .executeTakeFirst()
    return { rev: row?.repoRev ?? '' }
  },
})

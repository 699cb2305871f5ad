import type { RouteContext, Routes } from './context.ts'

export default (ctx: RouteContext): Routes => ({
  // Aligned with the request: whether the actor muted each thread root.
  async getThreadMutesOnSubjects(req) {
    if (req.threadRoots.length === 0) return { muted: [] }
    const rows = await ctx.db
      .selectFrom('thread_mute')
      .where('mutedByDid', '=', req.actorDid)
      .where('rootUri', 'in', req.threadRoots)
      .select('rootUri')
      .execute()
    const muted = new Set(rows.map((r) => r.rootUri))
    return { muted: req.threadRoots.map((uri) => muted.has(uri)) }
  },
})

// Thread mutes: reads, and the writes the stock dataplane leaves out (in the stock the AppView's
// muteThread/unmuteThread go through bsync, whose subscription writes `thread_mute`). The writes
// keep exactly the state that subscription keeps, so either writer's rows read alike:
//   - CreateThreadMute inserts (mutedByDid, rootUri, createdAt = now); muting again changes
//     nothing and keeps the first time (`on conflict do nothing`, as bsync's add);
//   - DeleteThreadMute removes the (actor, root) row; removing a mute that is not there is not
//     an error (bsync's remove);
//   - ClearThreadMutes removes every thread mute of the actor and nobody else's (bsync's clear
//     operation leaves thread mutes alone; this rpc exists to clear them).
// Inputs are checked, as bsync's are not: the actor must be a DID and the root the at:// uri of
// a post under a DID (the only uris GetThreadMutesOnSubjects is ever asked about, since thread
// roots are stored post uris), else InvalidArgument. A mute that could never be read is refused
// rather than stored.
import { Code, ConnectError } from '@connectrpc/connect'
import type { RouteContext, Routes } from './context.ts'
import { isDid, parseAtUri } from './util/at-uri.ts'
import { viewerRows } from './util/viewer-state.ts'

const POST_COLLECTION = 'app.bsky.feed.post'

export default (ctx: RouteContext): Routes => ({
  // Aligned with the request: whether the actor muted each thread root.
  async getThreadMutesOnSubjects(req) {
    if (req.threadRoots.length === 0) return { muted: [] }
    const muted = await viewerRows(ctx.db, req.actorDid, 'threadMute', req.threadRoots)
    return { muted: req.threadRoots.map((uri) => muted.has(uri)) }
  },

  async createThreadMute(req) {
    assertActor(req.actorDid)
    assertThreadRoot(req.threadRoot)
    await ctx.db
      .insertInto('thread_mute')
      .values({
        mutedByDid: req.actorDid,
        rootUri: req.threadRoot,
        createdAt: new Date().toISOString(),
      })
      .onConflict((oc) => oc.doNothing())
      .execute()
    return {}
  },

  async deleteThreadMute(req) {
    assertActor(req.actorDid)
    assertThreadRoot(req.threadRoot)
    await ctx.db
      .deleteFrom('thread_mute')
      .where('mutedByDid', '=', req.actorDid)
      .where('rootUri', '=', req.threadRoot)
      .execute()
    return {}
  },

  async clearThreadMutes(req) {
    assertActor(req.actorDid)
    await ctx.db.deleteFrom('thread_mute').where('mutedByDid', '=', req.actorDid).execute()
    return {}
  },
})

function assertActor(did: string): void {
  if (!isDid(did)) throw new ConnectError(`invalid actor did: ${did}`, Code.InvalidArgument)
}

/** `at://<did>/app.bsky.feed.post/<rkey>`, nothing before or after (no query, no fragment). */
function assertThreadRoot(uri: string): void {
  const parts = parseAtUri(uri)
  const canonical = parts && `at://${parts.host}/${POST_COLLECTION}/${parts.rkey}`
  if (!parts?.rkey || !isDid(parts.host) || uri !== canonical) {
    throw new ConnectError(`thread root must be a post's at:// uri: ${uri}`, Code.InvalidArgument)
  }
}

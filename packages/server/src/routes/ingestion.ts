import { Code, ConnectError } from '@connectrpc/connect'
import type { RouteContext, Routes } from './context.ts'

const LIST_COLLECTION = 'app.bsky.graph.list'

// Mute writes the AppView makes directly (muteActor, muteActorList, …). Thread-mute writes live
// with the thread-mute reads, in thread-mutes.ts.
export default (ctx: RouteContext): Routes => ({
  // Muting again replaces the repost/quote-post scope and keeps the original time.
  async createActorMute(req) {
    const { actorDid, subjectDid, onlyReposts, onlyQuoteposts } = req
    assertNotSelf(actorDid, subjectDid)
    await ctx.db
      .insertInto('mute')
      .values({
        subjectDid,
        mutedByDid: actorDid,
        createdAt: new Date().toISOString(),
        onlyReposts,
        onlyQuoteposts,
      })
      .onConflict((oc) =>
        oc.columns(['mutedByDid', 'subjectDid']).doUpdateSet({ onlyReposts, onlyQuoteposts }),
      )
      .execute()
    return {}
  },

  async deleteActorMute(req) {
    assertNotSelf(req.actorDid, req.subjectDid)
    await ctx.db
      .deleteFrom('mute')
      .where('mutedByDid', '=', req.actorDid)
      .where('subjectDid', '=', req.subjectDid)
      .execute()
    return {}
  },

  async clearActorMutes(req) {
    await ctx.db.deleteFrom('mute').where('mutedByDid', '=', req.actorDid).execute()
    return {}
  },

  async createActorMutelistSubscription(req) {
    assertListUri(req.subjectUri)
    await ctx.db
      .insertInto('list_mute')
      .values({
        listUri: req.subjectUri,
        mutedByDid: req.actorDid,
        createdAt: new Date().toISOString(),
      })
      .onConflict((oc) => oc.doNothing())
      .execute()
    return {}
  },

  async deleteActorMutelistSubscription(req) {
    assertListUri(req.subjectUri)
    await ctx.db
      .deleteFrom('list_mute')
      .where('mutedByDid', '=', req.actorDid)
      .where('listUri', '=', req.subjectUri)
      .execute()
    return {}
  },

  async clearActorMutelistSubscriptions(req) {
    await ctx.db.deleteFrom('list_mute').where('mutedByDid', '=', req.actorDid).execute()
    return {}
  },
})

function assertNotSelf(actorDid: string, subjectDid: string): void {
  if (actorDid === subjectDid) {
    throw new ConnectError('cannot mute yourself', Code.InvalidArgument)
  }
}

/** Only lists can be muted: `at://<authority>/app.bsky.graph.list/<rkey>`. */
function assertListUri(uri: string): void {
  const match = /^(?:at:\/\/)?[^/?#\s]+\/([^/?#\s]+)/.exec(uri)
  if (match?.[1] !== LIST_COLLECTION) {
    throw new ConnectError('must mute a list', Code.InvalidArgument)
  }
}

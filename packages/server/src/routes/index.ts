// Route modules, one per area of the proto (named as the proto's section comments name them).
// Methods no module implements answer Unimplemented (Connect fills them in).
import type { AnyMessage, Message, MessageType, PartialMessage } from '@bufbuild/protobuf'
import type { HandlerContext, ServiceImpl } from '@connectrpc/connect'
import { Service } from '@openplane/proto'
import type { RouteContext, Routes } from './context.ts'
import activitySubscriptions from './activity-subscriptions.ts'
import blocklists from './blocklists.ts'
import blocks from './blocks.ts'
import bookmarks from './bookmarks.ts'
import drafts from './drafts.ts'
import feedGenerators from './feed-generators.ts'
import feeds from './feeds.ts'
import follows from './follows.ts'
import graph from './graph.ts'
import identity from './identity.ts'
import ingestion from './ingestion.ts'
import interactionCounts from './interaction-counts.ts'
import labels from './labels.ts'
import likes from './likes.ts'
import lists from './lists.ts'
import moderation from './moderation.ts'
import mutelists from './mutelists.ts'
import mutes from './mutes.ts'
import notifications from './notifications.ts'
import ping from './ping.ts'
import profile from './profile.ts'
import quotes from './quotes.ts'
import records from './records.ts'
import relationships from './relationships.ts'
import reposts from './reposts.ts'
import search from './search.ts'
import siteStandard from './site-standard.ts'
import sitemaps from './sitemaps.ts'
import starterPacks from './starter-packs.ts'
import suggestions from './suggestions.ts'
import sync from './sync.ts'
import threadMutes from './thread-mutes.ts'
import threads from './threads.ts'
import verifications from './verifications.ts'
import { subjectCheck } from './util/subjects.ts'

export { timelineAnswer } from './feeds.ts'
export type { FollowGraph, HomeTimelineReader, RouteContext, Routes } from './context.ts'

// In the order of the proto's sections.
const modules: ((ctx: RouteContext) => Routes)[] = [
  ping,
  identity,
  records,
  follows,
  verifications,
  likes,
  reposts,
  quotes,
  interactionCounts,
  profile,
  relationships,
  lists,
  mutes,
  mutelists,
  threadMutes,
  blocks,
  blocklists,
  notifications,
  activitySubscriptions,
  feedGenerators,
  feeds,
  threads,
  search,
  suggestions,
  labels,
  starterPacks,
  sync,
  moderation,
  bookmarks,
  drafts,
  graph,
  sitemaps,
  ingestion,
  siteStandard,
]

export function buildRoutes(ctx: RouteContext): Partial<ServiceImpl<typeof Service>> {
  const impl: Routes = {}
  for (const make of modules) {
    for (const [name, fn] of Object.entries(make(ctx))) {
      if (name in impl) throw new Error(`rpc ${name} is implemented by two route modules`)
      Object.assign(impl, { [name]: checkingSubjects(name, fn as UnaryRoute) })
    }
  }
  return impl
}

/** The route, after its request's own identifiers are checked (util/subjects.ts). */
function checkingSubjects(name: string, route: UnaryRoute): UnaryRoute {
  const method = (Service.methods as Record<string, { I: unknown } | undefined>)[name]
  const check = method && subjectCheck(method.I as MessageType<AnyMessage>)
  if (!check) return route
  return (req, context) => {
    check(req as AnyMessage)
    return route(req, context)
  }
}

/** A route as ServiceImpl types it, taken generically. */
export type UnaryRoute = (
  req: Message,
  context: HandlerContext,
) => Promise<PartialMessage<AnyMessage>> | PartialMessage<AnyMessage>

/** Local names of the implemented methods; a context is not needed to list them. */
export function implementedMethods(): string[] {
  const stub = new Proxy({}, { get: () => undefined }) as RouteContext
  return Object.keys(buildRoutes(stub))
}

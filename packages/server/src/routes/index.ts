// Route modules, one per area of the proto (named as the proto's section comments name them).
// Methods no module implements answer Unimplemented (Connect fills them in).
import type { ServiceImpl } from '@connectrpc/connect'
import { GetTimelineRequest, Service } from '@openplane/proto'
import { directRoute, type DirectRoute, type RouteContext, type Routes } from './context.ts'
import activitySubscriptions from './activity-subscriptions.ts'
import blocklists from './blocklists.ts'
import blocks from './blocks.ts'
import bookmarks from './bookmarks.ts'
import drafts from './drafts.ts'
import feedGenerators from './feed-generators.ts'
import feeds, { timelinePage } from './feeds.ts'
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
import { timelineFrame } from './util/timeline-wire.ts'

export type {
  DirectRoute,
  FollowGraph,
  HomeTimelineReader,
  RouteContext,
  Routes,
} from './context.ts'

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
      Object.assign(impl, { [name]: fn })
    }
  }
  return impl
}

/**
 * The rpcs the direct lane answers, by request path: GetTimeline, asked for on every home page,
 * whose answer the fan-out timelines give in a fraction of what Connect's per-request work costs.
 */
export function directRoutes(ctx: RouteContext): Map<string, DirectRoute> {
  const path = (name: string) => `/${Service.typeName}/${name}`
  const getTimeline = Service.methods.getTimeline.name
  return new Map([
    [
      path(getTimeline),
      directRoute(getTimeline, GetTimelineRequest, async (req) =>
        timelineFrame(await timelinePage(ctx, req)),
      ),
    ],
  ])
}

/** Local names of the implemented methods; a context is not needed to list them. */
export function implementedMethods(): string[] {
  const stub = new Proxy({}, { get: () => undefined }) as RouteContext
  return Object.keys(buildRoutes(stub))
}

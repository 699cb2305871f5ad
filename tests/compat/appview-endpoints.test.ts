// Every XRPC endpoint of the pinned AppView that reads the dataplane, through the stock AppView on
// our dataplane and on the stock dataplane, over one network: anonymous and signed in where the
// endpoint allows both, walking cursors. docs/compatibility.md lists each endpoint with the test
// that covers it; tests/compat/compatibility.test.ts keeps that table complete.
//
// State comes through its real paths: records through the PDS (both sides index its firehose),
// mutes, bookmarks, drafts and preferences through the AppView into bsync (both sides tail it),
// takedowns through each AppView's admin endpoint (each writes its own dataplane).
import { afterAll, beforeAll, describe, it } from 'vitest'
import {
  act as actThrough,
  appViewDiff,
  caughtUp,
  type AppViewDiff,
  type Caller,
  type Params,
} from '../harness/appview-diff.ts'
import { recountSchemaCounters } from '../harness/counters.ts'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { appViewEnvFor, spawnAppView, spawnDataplane, type Child } from '../harness/processes.ts'
import { playScenario } from '../harness/scenario.ts'
import { createUser, setProfile, type Did } from '../harness/seed.ts'
import { dropSchemas, startStockNetwork, type StockNetwork } from '../harness/stock-network.ts'

/** How an endpoint may be called: who is tried. */
type Access = 'anon+user' | 'user' | 'admin' | 'anon'

interface Case {
  nsid: string
  access: Access
  /** Parameter sets tried (each with every caller). */
  params: (s: Seeded) => Params[]
  /** Walk cursors (with a small limit). */
  pages?: boolean
  clock?: string[]
  /** A procedure: POSTed with this body (only those whose effects cannot double). */
  body?: (s: Seeded) => unknown
  /** The answer is the AppView's own configuration (the two AppViews are configured apart). */
  statusOnly?: boolean
}

interface Seeded {
  u: Record<'alice' | 'bob' | 'carol' | 'dan' | 'eve', Did>
  deleted: Did
  posts: string[]
  postCids: Record<string, string>
  lists: string[]
  packs: string[]
  feeds: string[]
  threadRoot: string
}

const CASES: Case[] = [
  // actor
  {
    nsid: 'app.bsky.actor.getProfile',
    access: 'anon+user',
    params: (s) => actors(s).map((actor) => ({ actor })),
  },
  {
    nsid: 'app.bsky.actor.getProfiles',
    access: 'anon+user',
    params: (s) => [{ actors: actors(s) }],
  },
  {
    nsid: 'app.bsky.actor.getSuggestions',
    access: 'anon+user',
    params: () => [{ limit: 2 }],
    pages: true,
  },
  {
    nsid: 'app.bsky.actor.searchActors',
    access: 'anon+user',
    params: () => [{ q: 'a', limit: 2 }, { q: 'bob' }],
    pages: true,
  },
  {
    nsid: 'app.bsky.actor.searchActorsTypeahead',
    access: 'anon+user',
    params: () => [{ q: 'al' }, { q: 'd' }],
  },
  // age assurance (state from bsync's events)
  {
    nsid: 'app.bsky.ageassurance.getState',
    access: 'user',
    params: () => [{ countryCode: 'GB' }, { countryCode: 'US', regionCode: 'CA' }],
  },
  { nsid: 'app.bsky.unspecced.getAgeAssuranceState', access: 'user', params: () => [{}] },
  // bookmarks and drafts (bsync)
  {
    nsid: 'app.bsky.bookmark.getBookmarks',
    access: 'user',
    params: () => [{ limit: 1 }],
    pages: true,
    clock: ['createdAt'],
  },
  {
    nsid: 'app.bsky.draft.getDrafts',
    access: 'user',
    params: () => [{ limit: 1 }],
    pages: true,
    clock: ['createdAt', 'updatedAt', 'cursor'],
  },
  // feed
  {
    nsid: 'app.bsky.feed.getActorFeeds',
    access: 'anon+user',
    params: (s) => [{ actor: s.u.alice, limit: 1 }, { actor: s.u.bob }],
    pages: true,
  },
  {
    nsid: 'app.bsky.feed.getActorLikes',
    access: 'user',
    params: (s) => [
      { actor: s.u.alice, limit: 2 },
      { actor: s.u.bob, limit: 2 },
    ],
    pages: true,
  },
  {
    nsid: 'app.bsky.feed.getAuthorFeed',
    access: 'anon+user',
    params: (s) => actors(s).map((actor) => ({ actor, limit: 3 })),
    pages: true,
  },
  {
    nsid: 'app.bsky.feed.getFeedGenerator',
    access: 'anon+user',
    params: (s) => s.feeds.map((feed) => ({ feed })),
  },
  {
    nsid: 'app.bsky.feed.getFeedGenerators',
    access: 'anon+user',
    params: (s) => [{ feeds: s.feeds }],
  },
  {
    nsid: 'app.bsky.feed.getLikes',
    access: 'anon+user',
    params: (s) => s.posts.slice(0, 4).map((uri) => ({ uri, limit: 1 })),
    pages: true,
  },
  {
    nsid: 'app.bsky.feed.getListFeed',
    access: 'anon+user',
    params: (s) => s.lists.map((list) => ({ list, limit: 2 })),
    pages: true,
  },
  {
    nsid: 'app.bsky.feed.getPosts',
    access: 'anon+user',
    params: (s) => [{ uris: s.posts.slice(0, 25) }],
  },
  {
    nsid: 'app.bsky.feed.getPostThread',
    access: 'anon+user',
    params: (s) => [s.threadRoot, ...s.posts.slice(0, 3)].map((uri) => ({ uri })),
  },
  {
    nsid: 'app.bsky.feed.getQuotes',
    access: 'anon+user',
    params: (s) => s.posts.slice(0, 6).map((uri) => ({ uri, limit: 1 })),
    pages: true,
  },
  {
    nsid: 'app.bsky.feed.getRepostedBy',
    access: 'anon+user',
    params: (s) => s.posts.slice(0, 6).map((uri) => ({ uri, limit: 1 })),
    pages: true,
  },
  {
    nsid: 'app.bsky.feed.getSuggestedFeeds',
    access: 'anon+user',
    params: () => [{ limit: 1 }],
    pages: true,
  },
  { nsid: 'app.bsky.feed.getTimeline', access: 'user', params: () => [{ limit: 3 }], pages: true },
  {
    nsid: 'app.bsky.feed.searchPosts',
    access: 'anon+user',
    params: () => [{ q: 'post', limit: 2 }, { q: 'bob' }],
    pages: true,
  },
  {
    nsid: 'app.bsky.feed.searchPostsV2',
    access: 'anon+user',
    params: () => [{ q: 'post', limit: 2 }],
    pages: true,
  },
  // graph
  {
    nsid: 'app.bsky.graph.getActorStarterPacks',
    access: 'anon+user',
    params: (s) => [{ actor: s.u.alice, limit: 1 }, { actor: s.u.carol }],
    pages: true,
  },
  { nsid: 'app.bsky.graph.getBlocks', access: 'user', params: () => [{ limit: 1 }], pages: true },
  {
    nsid: 'app.bsky.graph.getFollowers',
    access: 'anon+user',
    params: (s) => actors(s).map((actor) => ({ actor, limit: 2 })),
    pages: true,
  },
  {
    nsid: 'app.bsky.graph.getFollows',
    access: 'anon+user',
    params: (s) => actors(s).map((actor) => ({ actor, limit: 2 })),
    pages: true,
  },
  {
    nsid: 'app.bsky.graph.getKnownFollowers',
    access: 'user',
    params: (s) => actors(s).map((actor) => ({ actor, limit: 1 })),
    pages: true,
  },
  {
    nsid: 'app.bsky.graph.getList',
    access: 'anon+user',
    params: (s) => s.lists.map((list) => ({ list, limit: 1 })),
    pages: true,
  },
  {
    nsid: 'app.bsky.graph.getListBlocks',
    access: 'user',
    params: () => [{ limit: 1 }],
    pages: true,
  },
  {
    nsid: 'app.bsky.graph.getListMutes',
    access: 'user',
    params: () => [{ limit: 1 }],
    pages: true,
  },
  {
    nsid: 'app.bsky.graph.getLists',
    access: 'anon+user',
    params: (s) => actors(s).map((actor) => ({ actor, limit: 1 })),
    pages: true,
  },
  {
    nsid: 'app.bsky.graph.getListsWithMembership',
    access: 'user',
    params: (s) => [{ actor: s.u.bob, limit: 1 }, { actor: s.u.carol }],
    pages: true,
  },
  { nsid: 'app.bsky.graph.getMutes', access: 'user', params: () => [{ limit: 1 }], pages: true },
  {
    nsid: 'app.bsky.graph.getRelationships',
    access: 'anon',
    params: (s) => [
      { actor: s.u.alice, others: actors(s) },
      { actor: s.u.dan, others: [s.u.bob, s.u.alice] },
    ],
  },
  {
    nsid: 'app.bsky.graph.getStarterPack',
    access: 'anon+user',
    params: (s) => s.packs.map((starterPack) => ({ starterPack })),
  },
  {
    nsid: 'app.bsky.graph.getStarterPacks',
    access: 'anon+user',
    params: (s) => [{ uris: s.packs }],
  },
  {
    nsid: 'app.bsky.graph.getStarterPacksWithMembership',
    access: 'user',
    params: (s) => [{ actor: s.u.bob, limit: 1 }, { actor: s.u.eve }],
    pages: true,
  },
  {
    nsid: 'app.bsky.graph.getSuggestedFollowsByActor',
    access: 'anon+user',
    params: (s) => [{ actor: s.u.alice }],
  },
  {
    nsid: 'app.bsky.graph.searchStarterPacks',
    access: 'anon+user',
    params: () => [{ q: 'pack', limit: 1 }],
    pages: true,
  },
  {
    nsid: 'app.bsky.graph.searchStarterPacksV2',
    access: 'anon+user',
    params: () => [{ q: 'pack', limit: 1 }],
    pages: true,
  },
  // labelers
  {
    nsid: 'app.bsky.labeler.getServices',
    access: 'anon+user',
    params: (s) => [{ dids: actors(s) }, { dids: actors(s), detailed: true }],
  },
  // notifications
  { nsid: 'app.bsky.notification.getPreferences', access: 'user', params: () => [{}] },
  {
    nsid: 'app.bsky.notification.getUnreadCount',
    access: 'user',
    params: () => [{}, { priority: true }],
  },
  {
    nsid: 'app.bsky.notification.listActivitySubscriptions',
    access: 'user',
    params: () => [{ limit: 1 }],
    pages: true,
  },
  {
    nsid: 'app.bsky.notification.listNotifications',
    access: 'user',
    params: () => [{ limit: 2 }, { priority: true }, { reasons: ['like', 'reply'] }],
    pages: true,
  },
  // unspecced
  {
    nsid: 'app.bsky.unspecced.getPopularFeedGenerators',
    access: 'anon+user',
    params: () => [{ limit: 1 }, { query: 'feed' }],
    pages: true,
  },
  {
    nsid: 'app.bsky.unspecced.getPostThreadV2',
    access: 'anon+user',
    params: (s) => [s.threadRoot, s.posts[0]!].map((anchor) => ({ anchor })),
  },
  {
    nsid: 'app.bsky.unspecced.getPostThreadOtherV2',
    access: 'anon+user',
    params: (s) => [s.threadRoot].map((anchor) => ({ anchor })),
  },
  { nsid: 'app.bsky.unspecced.getTaggedSuggestions', access: 'anon', params: () => [{}] },
  { nsid: 'app.bsky.unspecced.getSuggestedFeeds', access: 'anon+user', params: () => [{}] },
  { nsid: 'app.bsky.unspecced.getSuggestedStarterPacks', access: 'anon+user', params: () => [{}] },
  {
    nsid: 'app.bsky.unspecced.getOnboardingSuggestedStarterPacks',
    access: 'anon+user',
    params: () => [{}],
  },
  { nsid: 'app.bsky.unspecced.getSuggestedUsers', access: 'anon+user', params: () => [{}] },
  {
    nsid: 'app.bsky.unspecced.getSuggestedOnboardingUsers',
    access: 'anon+user',
    params: () => [{}],
  },
  {
    nsid: 'app.bsky.unspecced.getSuggestedUsersForDiscover',
    access: 'anon+user',
    params: () => [{}],
  },
  {
    nsid: 'app.bsky.unspecced.getSuggestedUsersForExplore',
    access: 'anon+user',
    params: () => [{}],
  },
  {
    nsid: 'app.bsky.unspecced.getSuggestedUsersForSeeMore',
    access: 'anon+user',
    params: () => [{}],
  },
  { nsid: 'app.bsky.unspecced.getTrends', access: 'anon+user', params: () => [{}] },
  {
    nsid: 'app.bsky.embed.getEmbedExternalView',
    access: 'anon+user',
    params: (s) => [{ url: `https://example.com/${s.u.alice}` }],
  },
  // com.atproto and internal
  {
    nsid: 'com.atproto.admin.getAccountInfos',
    access: 'admin',
    params: (s) => [{ dids: actors(s) }],
  },
  {
    nsid: 'com.atproto.admin.getSubjectStatus',
    access: 'admin',
    params: (s) => [{ did: s.u.bob }, { uri: s.posts[0]! }, { uri: s.posts[1]! }],
  },
  {
    nsid: 'com.atproto.identity.resolveHandle',
    access: 'anon',
    params: () => ['alice.test', 'dan-renamed.test', 'nobody.test'].map((handle) => ({ handle })),
  },
  {
    nsid: 'com.atproto.label.queryLabels',
    access: 'anon',
    params: (s) => [{ uriPatterns: ['*'] }, { uriPatterns: [s.u.alice] }],
  },
  {
    nsid: 'com.atproto.repo.getRecord',
    access: 'anon+user',
    params: (s) => s.posts.slice(0, 3).map(recordParams),
  },
  {
    nsid: 'internal.bsky.actor.getProfiles',
    access: 'admin',
    params: (s) => [{ actors: actors(s) }],
  },
  // Needs a feed generator's own service, which the test network does not run: both AppViews
  // fail alike to reach it.
  {
    nsid: 'app.bsky.feed.getFeed',
    access: 'anon+user',
    params: (s) => s.feeds.map((feed) => ({ feed })),
  },
  // Served without the dataplane (static, or other services the test network does not run):
  // compared all the same, so a change in the AppView that makes them read it shows.
  { nsid: 'app.bsky.unspecced.getConfig', access: 'anon', params: () => [{}], statusOnly: true },
  { nsid: 'app.bsky.ageassurance.getConfig', access: 'anon+user', params: () => [{}] },
  { nsid: 'app.bsky.unspecced.getTrendingTopics', access: 'anon+user', params: () => [{}] },
  { nsid: 'com.atproto.temp.fetchLabels', access: 'anon', params: () => [{}] },
  { nsid: 'app.bsky.contact.getSyncStatus', access: 'user', params: () => [{}] },
  { nsid: 'app.bsky.contact.getMatches', access: 'user', params: () => [{}] },
  {
    nsid: 'app.bsky.contact.dismissMatch',
    access: 'user',
    params: () => [{}],
    body: (s) => ({ subject: s.u.bob }),
  },
  {
    nsid: 'app.bsky.contact.importContacts',
    access: 'user',
    params: () => [{}],
    body: () => ({ token: 't', contacts: ['+15555550100'] }),
  },
  { nsid: 'app.bsky.contact.removeData', access: 'user', params: () => [{}], body: () => ({}) },
  {
    nsid: 'app.bsky.contact.startPhoneVerification',
    access: 'user',
    params: () => [{}],
    body: () => ({ phone: '+15555550100' }),
  },
  {
    nsid: 'app.bsky.contact.verifyPhone',
    access: 'user',
    params: () => [{}],
    body: () => ({ phone: '+15555550100', code: '123456' }),
  },
  {
    nsid: 'app.bsky.contact.sendNotification',
    access: 'admin',
    params: () => [{}],
    body: (s) => ({ from: s.u.alice, to: s.u.bob }),
  },
  {
    nsid: 'app.bsky.notification.registerPush',
    access: 'user',
    params: () => [{}],
    body: () => ({
      serviceDid: 'did:web:push.test',
      token: 'tok',
      platform: 'web',
      appId: 'xyz.blueskyweb.app',
    }),
  },
  {
    nsid: 'app.bsky.notification.unregisterPush',
    access: 'user',
    params: () => [{}],
    body: () => ({
      serviceDid: 'did:web:push.test',
      token: 'tok',
      platform: 'web',
      appId: 'xyz.blueskyweb.app',
    }),
  },
  {
    nsid: 'app.bsky.ageassurance.begin',
    access: 'user',
    params: () => [{}],
    body: () => ({ email: 'a@example.com', language: 'en', countryCode: 'GB' }),
  },
  {
    nsid: 'app.bsky.unspecced.initAgeAssurance',
    access: 'user',
    params: () => [{}],
    body: () => ({ email: 'a@example.com', language: 'en', countryCode: 'GB' }),
  },
]

function actors(s: Seeded): string[] {
  return [...Object.values(s.u), s.deleted, 'bob.test', 'did:plc:unknownunknownunknownun']
}

function recordParams(uri: string): Params {
  const [, , repo, collection, rkey] = uri.split('/')
  return { repo: repo!, collection: collection!, rkey: rkey! }
}

describe('every endpoint that reads the dataplane: the stock AppView on ours vs on the stock', () => {
  let net: StockNetwork
  let dataplane: Child
  let appview: Child
  let diff: AppViewDiff
  let seeded: Seeded
  const schema = uniqueName('op_compat')

  beforeAll(async () => {
    net = await startStockNetwork()
    const { network } = net
    dataplane = await spawnDataplane({
      pgUrl: PG_URL,
      schema,
      plcUrl: network.plc.url,
      pdsUrl: network.pds.url,
      extra: {
        // From the PDS's first event: the network's own accounts (the moderation service's, the
        // lexicon authority's) were made before this process started.
        DATAPLANE_FIREHOSE_CURSOR: '0',
        DATAPLANE_BSYNC_URL: network.bsync.url,
        DATAPLANE_BSYNC_API_KEY: 'bsync-api-key',
        DATAPLANE_BSYNC_HTTP_VERSION: '1.1',
        // Search as the stock searches: full-text search has its own suite (search-fulltext).
        DATAPLANE_SEARCH: 'substring',
      },
    })
    appview = await spawnAppView(appViewEnvFor(network, dataplane.url))
    diff = appViewDiff(net, () => appview.url)
    seeded = await seed(
      net,
      diff,
      () => appview.url,
      () => dataplane.url,
    )
    await caughtUp(net, dataplane.url)
    // The stock's counters stay stale where rows went without a recount (the deleted account's):
    // recounted, the rule every differential uses.
    await recountSchemaCounters(net.schema)
  }, 300_000)

  afterAll(async () => {
    await appview?.stop()
    await dataplane?.stop()
    await net?.close()
    await dropSchemas([schema])
  })

  for (const c of CASES) {
    it(c.nsid, async () => {
      for (const caller of callers(c.access, seeded)) {
        for (const params of c.params(seeded)) {
          const opts = { clock: c.clock, body: c.body?.(seeded), statusOnly: c.statusOnly }
          if (c.pages) await diff.walk(c.nsid, params, caller, opts)
          else await diff.same(c.nsid, params, caller, opts)
        }
      }
    })
  }
})

function callers(access: Access, s: Seeded): Caller[] {
  const users = [s.u.alice, s.u.bob, s.u.dan]
  if (access === 'anon') return [undefined]
  if (access === 'admin') return ['admin']
  if (access === 'user') return users
  return [undefined, ...users]
}

/** The scenario (every record kind), plus feeds, packs, labelers, gates and private state. */
async function seed(
  net: StockNetwork,
  diff: AppViewDiff,
  oursUrl: () => string,
  dataplaneUrl: () => string,
): Promise<Seeded> {
  const { network, sc } = net
  const { dids, deleted } = await playScenario(network, sc)
  const u = dids as Record<'alice' | 'bob' | 'carol' | 'dan', Did>
  const eve = await createUser(sc, 'eve')
  await setProfile(sc, eve, 'Eve', 'posts about packs')
  const { alice, bob, dan } = u
  const now = () => new Date().toISOString()
  const put = (did: Did, collection: string, rkey: string, record: object) =>
    sc.agent.com.atproto.repo.putRecord(
      { repo: did, collection, rkey, record: { $type: collection, ...record }, validate: false },
      { headers: sc.getHeaders(did) },
    )
  const feeds = [
    (await sc.createFeedGen(alice, 'did:web:feed.test', 'a feed')).uriStr,
    (await sc.createFeedGen(bob, 'did:web:feed2.test', 'another feed')).uriStr,
  ]
  const pack = await sc.createStarterPack(eve, 'Cool pack', [alice, bob], [feeds[0]! as never])
  const curated = await sc.createList(bob, 'reads', 'curate')
  await sc.addToList(bob, alice, curated)
  await sc.addToList(bob, eve, curated)
  const mods = await sc.createList(eve, 'spammers', 'mod')
  await sc.addToList(eve, dan, mods)
  await put(alice, 'app.bsky.graph.listblock', '3kblockmods22', {
    subject: mods.uriStr,
    createdAt: now(),
  })
  await put(eve, 'app.bsky.labeler.service', 'self', {
    policies: { labelValues: ['spam'] },
    createdAt: now(),
  })
  await put(alice, 'app.bsky.notification.declaration', 'self', { allowSubscriptions: 'mutuals' })
  await sc.follow(eve, alice)
  await sc.follow(alice, eve)
  for (let i = 0; i < 4; i++) await sc.post(i % 2 ? eve : bob, `searchable post ${i}`)
  const threadRoot = (await sc.post(eve, 'a thread of packs')).ref
  const r1 = await sc.reply(alice, threadRoot, threadRoot, 'first')
  await network.processAll()
  await sc.reply(eve, threadRoot, r1.ref, 'second')
  await sc.repost(eve, sc.posts[alice]![0]!.ref)
  await sc.like(eve, sc.posts[alice]![0]!.ref)
  await network.processAll()

  const posts = Object.values(sc.posts)
    .flat()
    .concat(Object.values(sc.replies).flat())
    .map((p) => p.ref)
  const postCids = Object.fromEntries(posts.map((p) => [p.uriStr, p.cidStr]))

  // updateSeen: bsync calls UpdateNotificationSeen on each dataplane it is configured with
  // (BSYNC_DATAPLANE_URLS); ours is added beside the stock's, as an operator would.
  const bsyncCtx = network.bsync.ctx as unknown as { dataplaneClients: unknown[] }
  bsyncCtx.dataplaneClients.push(net.clientFor(dataplaneUrl(), '2'))
  // Private state through the AppView, into bsync.
  const act = (did: Did, nsid: string, body: unknown) => actThrough(net, did, nsid, body)
  await act(alice, 'app.bsky.graph.muteActor', { actor: dan })
  await act(bob, 'app.bsky.graph.muteActorList', { list: mods.uriStr })
  await act(dan, 'app.bsky.graph.muteThread', { root: threadRoot.uriStr })
  for (const p of posts.slice(0, 3)) {
    await act(alice, 'app.bsky.bookmark.createBookmark', { uri: p.uriStr, cid: p.cidStr })
  }
  await act(dan, 'app.bsky.bookmark.createBookmark', {
    uri: posts[0]!.uriStr,
    cid: posts[0]!.cidStr,
  })
  for (let i = 0; i < 3; i++) {
    await act(bob, 'app.bsky.draft.createDraft', { draft: { posts: [{ text: `draft ${i}` }] } })
  }
  await act(alice, 'app.bsky.notification.putPreferences', { priority: true })
  // A priority setting makes alice's actor_state row, stamped "last seen" with each side's own
  // clock; a seen-at of hers once both applied it puts the same, later, time on both.
  await caughtUp(net, dataplaneUrl())
  await act(alice, 'app.bsky.notification.updateSeen', { seenAt: now() })
  await act(dan, 'app.bsky.notification.putPreferencesV2', {
    reply: { include: 'follows', list: true, push: true },
  })
  await act(alice, 'app.bsky.notification.putActivitySubscription', {
    subject: eve,
    activitySubscription: { post: true, reply: true },
  })
  await act(bob, 'app.bsky.notification.updateSeen', { seenAt: now() })

  // A takedown through each AppView's admin endpoint: each writes its own dataplane.
  const takedown = {
    subject: { $type: 'com.atproto.repo.strongRef', uri: posts[1]!.uriStr, cid: posts[1]!.cidStr },
    takedown: { applied: true, ref: 'TAKEDOWN-1' },
  }
  for (const base of [network.bsky.url, oursUrl()]) {
    const res = await diff.call(
      base,
      'com.atproto.admin.updateSubjectStatus',
      {},
      'admin',
      takedown,
    )
    if (res.status !== 200) throw new Error(`takedown: ${res.status} ${JSON.stringify(res.body)}`)
  }
  return {
    u: { ...u, eve },
    deleted: deleted as Did,
    posts: posts.map((p) => p.uriStr),
    postCids,
    lists: [curated.uriStr, mods.uriStr],
    packs: [pack.uriStr],
    feeds,
    threadRoot: threadRoot.uriStr,
  }
}

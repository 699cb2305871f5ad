// Search (V1 and V2), feed generators, suggestions, sitemaps and site.standard, differentially.
// The curated tables (suggested_feed, suggested_follow, tagged_suggestion) have no writer in
// dev-env, so they are filled directly.
import { Timestamp } from '@bufbuild/protobuf'
import { Code } from '@connectrpc/connect'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startOurServer, type OurServer } from '../harness/ours.ts'
import { createUser, seedBasic } from '../harness/seed.ts'
import {
  startStockNetwork,
  type DataplaneClient,
  type StockNetwork,
} from '../harness/stock-network.ts'
import { didsOf, differ, WALK_LIMITS, type Differ } from './diff.ts'

const MISSING_DID = 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa'
const FEED_NAMES = ['All Cats', 'cat pics', 'Dogs', 'Birds 100%', 'b_rds', 'Cats & Dogs', 'news']

describe('search, feed generator and suggestion routes', () => {
  let net: StockNetwork
  let ours: OurServer
  let client: DataplaneClient
  let d: Differ
  let dids: Record<string, string>
  let feeds: string[]

  beforeAll(async () => {
    net = await startStockNetwork()
    dids = await seedBasic(net.sc)
    for (const name of ['eve', 'fred', 'bobby']) dids[name] = await createUser(net.sc, name)
    feeds = await seedSearch(net, dids)
    await net.network.processAll()
    ours = await startOurServer({
      schema: net.schema,
      plcUrl: net.network.plc.url,
      pdsUrl: net.network.pds.url,
    })
    client = net.clientFor(ours.server.url)
    d = differ(client, net.stock)
    await seedCurated(ours, dids, feeds)
  })
  afterAll(async () => {
    await ours?.close()
    await net?.close()
  })

  const actors = () => [...Object.values(dids), MISSING_DID]

  it('SearchActors / V2 / typeahead: terms walked at several limits', async () => {
    for (const term of [
      '',
      'a',
      '@alice',
      'alice.test',
      'bob',
      'B',
      'zzz',
      '%',
      'b_b',
      ' carol ',
    ]) {
      for (const limit of WALK_LIMITS) {
        await d.walk(`actors ${term} ${limit}`, (c, cursor) =>
          c.searchActors({ term, limit, cursor }),
        )
        await d.walk(`actorsV2 ${term} ${limit}`, async (c, cursor) => {
          const res = await c.searchActorsV2({ params: { query: term, limit, cursor } })
          return Object.assign(res, { cursor: res.pageInfo?.cursor ?? '' })
        })
      }
      await d.same(`typeahead ${term}`, (c) => c.searchActorsTypeahead({ params: { query: term } }))
      await d.same(`typeahead3 ${term}`, (c) =>
        c.searchActorsTypeahead({ params: { query: term, limit: 3 } }),
      )
    }
    await d.same('V2 no params', (c) => c.searchActorsV2({}))
    await d.same('V2 limit 0', (c) => c.searchActorsV2({ params: { query: 'a', limit: 0 } }))
    const bob = await d.same('bob', (c) => c.searchActors({ term: 'bob', limit: 10 }))
    expect(bob.dids.sort()).toEqual([dids.bob, dids.bobby].sort())
  })

  it('SearchPosts / V2: text, authors by handle and did, quoting, walked', async () => {
    const terms = [
      '',
      'again',
      'bob',
      'from:alice.test',
      'from:alice.test again',
      `${dids.alice} again`,
      'author:bob.test',
      'from:nobody.test again',
      '"kicking it" x',
      'posts from',
      'searchable',
    ]
    for (const term of terms) {
      for (const limit of WALK_LIMITS) {
        await d.walk(`posts ${term} ${limit}`, (c, cursor) =>
          c.searchPosts({ term, limit, cursor }),
        )
      }
      await d.walk(`postsV2 ${term}`, async (c, cursor) => {
        const res = await c.searchPostsV2({ params: { query: term, limit: 4, cursor } })
        return Object.assign(res, { cursor: res.pageInfo?.cursor ?? '' })
      })
      await d.same(`postsV2 author ${term}`, (c) =>
        c.searchPostsV2({ params: { query: term, limit: 50 }, filters: { authors: ['bob.test'] } }),
      )
    }
    const alice = await d.same('alice', (c) =>
      c.searchPosts({ term: 'from:alice.test', limit: 50 }),
    )
    expect(alice.uris.length).toBeGreaterThan(3)
    expect(alice.uris.every((u) => u.includes(dids.alice!))).toBe(true)
  })

  it('SearchStarterPacks / V2 and SearchFeedGenerators / V2', async () => {
    for (const term of ['', 'pack', 'PACK', 'zzz', '%']) {
      for (const limit of WALK_LIMITS) {
        await d.walk(`packs ${term} ${limit}`, (c, cursor) =>
          c.searchStarterPacks({ term, limit, cursor }),
        )
        await d.walk(`packsV2 ${term} ${limit}`, async (c, cursor) => {
          const res = await c.searchStarterPacksV2({ params: { query: term, limit, cursor } })
          return Object.assign(res, { cursor: res.pageInfo?.cursor ?? '' })
        })
      }
    }
    for (const query of ['', ' cat ', 'CATS', 'dogs', '100%', 'b_rds', 'zzz']) {
      for (const limit of [0, ...WALK_LIMITS]) {
        await d.same(`feedgens ${query} ${limit}`, (c) => c.searchFeedGenerators({ query, limit }))
        await d.walk(`feedgensV2 ${query} ${limit}`, async (c, cursor) => {
          const res = await c.searchFeedGeneratorsV2({ params: { query, limit, cursor } })
          return Object.assign(res, { cursor: res.pageInfo?.cursor ?? '' })
        })
      }
    }
    const cats = await d.same('cats', (c) => c.searchFeedGenerators({ query: 'cat', limit: 50 }))
    expect(cats.uris).toHaveLength(5)
  })

  it('GetActorFeeds and GetSuggestedFeeds walked; GetFeedGeneratorStatus unimplemented', async () => {
    for (const actorDid of actors()) {
      for (const limit of WALK_LIMITS) {
        await d.walk(`actor feeds ${actorDid} ${limit}`, (c, cursor) =>
          c.getActorFeeds({ actorDid, limit, cursor }),
        )
      }
    }
    // The stock orders by createdAt but its cursor carries sortAt, so paging one at a time past a
    // future-dated feed skips the other one; ours pages the same way.
    const walked = await d.walk('bob one by one', (c, cursor) =>
      c.getActorFeeds({ actorDid: dids.bob!, limit: 1, cursor }),
    )
    const whole = await d.same('bob at once', (c) =>
      c.getActorFeeds({ actorDid: dids.bob!, limit: 50 }),
    )
    expect(whole.uris).toHaveLength(5)
    expect(walked.flatMap((p) => p.uris)).toHaveLength(4)
    for (const limit of [0, ...WALK_LIMITS]) {
      await d.walk(`suggested feeds ${limit}`, (c, cursor) =>
        c.getSuggestedFeeds({ actorDid: dids.alice!, limit, cursor }),
      )
    }
    await d.same('numeric prefix cursor', (c) => c.getSuggestedFeeds({ limit: 2, cursor: '2abc' }))
    await d.bothReject(
      'bad cursor',
      (c) => c.getSuggestedFeeds({ cursor: 'abc' }),
      Code.InvalidArgument,
    )
    await d.bothReject(
      'actor feeds cursor',
      (c) => c.getActorFeeds({ actorDid: dids.alice!, cursor: 'abc' }),
      Code.InvalidArgument,
    )
    // The stock has no status (it throws); ours answers from the index, in request order.
    await expect(net.stock.getFeedGeneratorStatus({ uris: feeds })).rejects.toThrow()
    const missing = `at://${MISSING_DID}/app.bsky.feed.generator/missing`
    const { status } = await client.getFeedGeneratorStatus({ uris: [...feeds, missing] })
    expect(status).toEqual([...feeds.map(() => 'valid'), ''])
  })

  it('GetFollowSuggestions relative to an account: liked most, topped up from the curated list', async () => {
    for (const actorDid of actors()) {
      for (const relativeToDid of [dids.eve!, dids.alice!, MISSING_DID]) {
        for (const limit of [0, 1, 2, 5, 50]) {
          await d.same(`relative ${actorDid} ${relativeToDid} ${limit}`, (c) =>
            c.getFollowSuggestions({ actorDid, relativeToDid, limit }),
          )
        }
        await d.same(`relative cursor ${actorDid}`, (c) =>
          c.getFollowSuggestions({ actorDid, relativeToDid, cursor: 'x' }),
        )
      }
    }
    const fred = await d.same('fred', (c) =>
      c.getFollowSuggestions({ actorDid: dids.fred!, relativeToDid: dids.eve!, limit: 2 }),
    )
    expect(fred.dids).toEqual([dids.alice, dids.bob])
  })

  it('GetFollowSuggestions globally: pinned first, the rest shuffled, the cursor remembers', async () => {
    const curated = [dids.alice, dids.bob, dids.carol, dids.dan, dids.eve, dids.fred]
    for (const limit of [0, 2, 4]) {
      const [a, b] = await Promise.all(
        [client, net.stock].map((c) => c.getFollowSuggestions({ actorDid: dids.bobby!, limit })),
      )
      expect(a!.dids.slice(0, 2)).toEqual(b!.dids.slice(0, 2))
      // Past the pinned two, each side shuffles on its own: only the whole list compares as a set.
      if (!limit) expect([...a!.dids].sort()).toEqual([...b!.dids].sort())
      expect(a!.dids.every((did) => curated.includes(did))).toBe(true)
      expect(a!.cursor.split(':').slice(0, 2)).toEqual(['1', '2'])
      expect(a!.dids.length).toBe(limit || curated.length)
    }
    // Walk ours to the end with the cursor; each order is served once.
    const seen: string[] = []
    let cursor = ''
    for (let i = 0; i < 5; i++) {
      const res = await client.getFollowSuggestions({ actorDid: dids.bobby!, limit: 2, cursor })
      if (res.dids.length === 0) break
      seen.push(...res.dids)
      cursor = res.cursor
    }
    expect([...seen].sort()).toEqual([...curated].sort())
    // With only the pinned orders left the answer is deterministic: compare exactly.
    await d.same('pinned only', (c) =>
      c.getFollowSuggestions({ actorDid: dids.bobby!, cursor: '3:4:5:6:x' }),
    )
    await d.same('all served', (c) =>
      c.getFollowSuggestions({ actorDid: dids.bobby!, cursor: '1:2:3:4:5:6' }),
    )
  })

  it('GetSuggestedEntities', async () => {
    const res = await d.same('entities', (c) => c.getSuggestedEntities({}))
    expect(res.entities).toHaveLength(3)
  })

  it('sitemaps and site.standard', async () => {
    await d.same('index', (c) => c.getSitemapIndex({ type: 1 }))
    const date = Timestamp.fromDate(new Date(2025, 0, 1))
    const page = await d.same('page', (c) => c.getSitemapPage({ type: 1, date, bucket: 1 }))
    expect(page.sitemap.length).toBeGreaterThan(20)
    const other = Timestamp.fromDate(new Date(2025, 0, 2))
    for (const [i, req] of [{ date: other, bucket: 1 }, { date, bucket: 2 }, {}].entries()) {
      await d.bothReject(`missing page ${i}`, (c) => c.getSitemapPage(req), Code.NotFound)
    }
    await d.same('by uri', (c) => c.getSiteStandardRecordsByURI({ uris: [feeds[0]!] }))
    await d.same('by ref', (c) =>
      c.getSiteStandardRecordsByRef({ refs: [{ uri: feeds[0]!, cid: 'bafy' }] }),
    )
  })
})

/** Feed generators, starter packs, searchable posts, and likes for relative suggestions. */
async function seedSearch(net: StockNetwork, dids: Record<string, string>): Promise<string[]> {
  const sc = net.sc
  const { alice, bob, carol, eve, fred } = didsOf(dids, 'alice', 'bob', 'carol', 'eve', 'fred')
  const feeds: string[] = []
  for (const [i, name] of FEED_NAMES.entries()) {
    const ref = await sc.createFeedGen(i % 2 ? bob : alice, `did:web:feed${i}.test`, name)
    feeds.push(ref.uriStr)
  }
  // Two claiming a future createdAt: their sortAt is the indexing time, not createdAt.
  for (const days of [1, 2]) {
    await sc.agent.com.atproto.repo.createRecord(
      {
        repo: bob,
        collection: 'app.bsky.feed.generator',
        record: {
          $type: 'app.bsky.feed.generator',
          did: `did:web:future${days}.test`,
          displayName: `future cat ${days}`,
          createdAt: new Date(Date.now() + days * 86_400_000).toISOString(),
        },
      },
      { headers: sc.getHeaders(bob) },
    )
  }
  for (const name of ['Cool pack', 'pack two', 'Other PACK', 'unrelated']) {
    await sc.createStarterPack(carol, name, [alice, bob])
  }
  for (let i = 0; i < 6; i++) await sc.post(i % 2 ? alice : bob, `searchable post ${i} again`)
  // eve likes alice's posts most, then bob's, then carol's; fred follows carol.
  for (const post of sc.posts[alice]!.slice(0, 3)) await sc.like(eve, post.ref)
  for (const post of sc.posts[bob]!.slice(0, 2)) await sc.like(eve, post.ref)
  await sc.like(eve, sc.posts[carol]![0]!.ref)
  await sc.follow(fred, carol)
  return feeds
}

async function seedCurated(ours: OurServer, dids: Record<string, string>, feeds: string[]) {
  const db = ours.db.db
  await db
    .insertInto('suggested_feed')
    .values(feeds.map((uri, i) => ({ uri, order: i + 1 })))
    .execute()
  const curated = ['alice', 'bob', 'carol', 'dan', 'eve', 'fred']
  await db
    .insertInto('suggested_follow')
    .values(curated.map((n, i) => ({ did: dids[n]!, order: i + 1 })))
    .execute()
  await db
    .insertInto('tagged_suggestion')
    .values([
      { tag: 'tech', subject: dids.alice!, subjectType: 'actor' },
      { tag: 'tech', subject: feeds[0]!, subjectType: 'feed' },
      { tag: 'art', subject: dids.bob!, subjectType: 'actor' },
    ])
    .execute()
}

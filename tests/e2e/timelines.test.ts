// Fan-out timelines, differentially: with timelines in Redis (a celebrity threshold low enough
// that two authors are merged at read time, one of them until it stops being a celebrity, the
// other from copies of its list; short lists so deep pages run past their horizon,
// lossy mode off), every user's GetTimeline — each page size, every cursor — and
// app.bsky.feed.getTimeline through the stock AppView equal the stock's. Then the same while
// Redis hangs and after it comes back (writes were lost: lists are dropped and rebuilt), after a
// flush, and while Redis is down. A server without the indexer, on the same Postgres and Redis,
// answers the same from the store and its own graph (kept from the indexer's change feed),
// before and after a restart.
import type { SeedClient, TestNetwork } from '@atproto/dev-env'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PG_URL, uniqueName } from '../harness/env.ts'
import {
  appViewEnvFor,
  spawnAppView,
  spawnDataplane,
  waitForSeq,
  type Child,
} from '../harness/processes.ts'
import {
  startRedisCluster,
  startRedisServer,
  type RedisCluster,
  type RedisServer,
} from '../harness/redis-cluster.ts'
import { createUser, type Did } from '../harness/seed.ts'
import {
  dropSchemas,
  startStockNetwork,
  type DataplaneClient,
  type StockNetwork,
} from '../harness/stock-network.ts'

const USERS = ['celeb', 'star', 'hyper', 'ann', 'ben', 'cat', 'dev', 'eve'] as const
type Name = (typeof USERS)[number]
/** Handles (some role names are reserved by the PDS). */
const HANDLES: Record<Name, string> = {
  celeb: 'mira',
  star: 'stella',
  hyper: 'hugo',
  ann: 'ann',
  ben: 'ben',
  cat: 'cat',
  dev: 'dora',
  eve: 'eve',
}
type Sc = SeedClient<TestNetwork>

describe('fan-out timelines: our dataplane (Redis) vs the stock dataplane', () => {
  let net: StockNetwork
  let redis: RedisServer
  let dataplane: Child
  let appview: Child
  let ours: DataplaneClient
  /** A server without the indexer beside `dataplane`, and an AppView on it. */
  let follower: Child
  let onFollower: DataplaneClient
  let followerAppView: Child
  /** A second dataplane of ours, indexing the same PDS into its own schema, on Redis Cluster. */
  let clustered: Child
  let onCluster: DataplaneClient
  let cluster: RedisCluster
  const u = {} as Record<Name, Did>
  const schema = uniqueName('op_tl')
  const clusterSchema = uniqueName('op_tlc')
  const timelineEnv = {
    DATAPLANE_TIMELINES: 'redis',
    DATAPLANE_CELEBRITY_FOLLOWERS: '4',
    DATAPLANE_LOSSY_FOLLOW_LIMIT: 'off',
    DATAPLANE_TIMELINE_LENGTH: '12',
    DATAPLANE_AUTHOR_TIMELINE_LENGTH: '10',
  }

  beforeAll(async () => {
    net = await startStockNetwork()
    redis = await startRedisServer()
    const { network } = net
    dataplane = await spawnDataplane({
      pgUrl: PG_URL,
      schema,
      plcUrl: network.plc.url,
      pdsUrl: network.pds.url,
      extra: { ...timelineEnv, DATAPLANE_REDIS_NODES: `${redis.host}:${redis.port}` },
    })
    ours = net.clientFor(dataplane.url)
    cluster = await startRedisCluster(3)
    clustered = await spawnDataplane({
      pgUrl: PG_URL,
      schema: clusterSchema,
      plcUrl: network.plc.url,
      pdsUrl: network.pds.url,
      extra: {
        ...timelineEnv,
        DATAPLANE_REDIS_CLUSTER: 'true',
        DATAPLANE_REDIS_NODES: cluster.nodes.map((n) => `${n.host}:${n.port}`).join(','),
      },
    })
    onCluster = net.clientFor(clustered.url)
    appview = await spawnAppView(appViewEnvFor(network, dataplane.url))
    const sc = net.sc
    for (const name of USERS) u[name] = await createUser(sc, HANDLES[name])
    // The celebrity: followed by five (threshold 4); the hyper-follower follows everyone.
    for (const name of ['hyper', 'ann', 'ben', 'cat', 'dev'] as const)
      await sc.follow(u[name], u.celeb)
    // A second celebrity, who stays one throughout: reads merge its list from this server's copy
    // of it, and the pages compared below include such reads.
    for (const name of ['ann', 'ben', 'cat', 'eve'] as const) await sc.follow(u[name], u.star)
    for (const name of USERS) if (name !== 'hyper') await sc.follow(u.hyper, u[name])
    await sc.follow(u.ann, u.ben)
    await sc.follow(u.ben, u.cat)
    await sc.follow(u.cat, u.ann)
    await sc.follow(u.dev, u.ann)
    await sc.follow(u.dev, u.ben)
    await sc.follow(u.eve, u.dev)
    await posts(sc, 1)
    await settle()
    // Started before the activity: the follows and unfollows in it reach it through the feed.
    follower = await spawnFollower()
    onFollower = net.clientFor(follower.url)
    followerAppView = await spawnAppView(appViewEnvFor(network, follower.url))
    // Read everyone's timeline so lists materialise: from here on, writes go through fan-out.
    await warm()
    await activity(sc)
    await settle()
  })

  function spawnFollower(port?: number): Promise<Child> {
    return spawnDataplane({
      pgUrl: PG_URL,
      schema,
      plcUrl: net.network.plc.url,
      pdsUrl: net.network.pds.url,
      port,
      extra: {
        ...timelineEnv,
        DATAPLANE_INDEXER: 'false',
        DATAPLANE_REDIS_NODES: `${redis.host}:${redis.port}`,
      },
    })
  }

  afterAll(async () => {
    await appview?.stop()
    await followerAppView?.stop()
    await follower?.stop()
    await dataplane?.stop()
    await clustered?.stop()
    await redis?.dispose()
    await cluster?.stop()
    await net?.close()
    await dropSchemas([schema, clusterSchema])
  })

  /** A round of posts; the celebrity posts more than a list holds. */
  async function posts(sc: Sc, round: number): Promise<void> {
    for (let i = 0; i < 12; i++) await sc.post(u.celeb, `celeb ${round}.${i}`)
    for (let i = 0; i < 6; i++) await sc.post(u.star, `star ${round}.${i}`)
    for (const name of ['ann', 'ben', 'cat', 'dev', 'eve', 'hyper'] as const) {
      for (let i = 0; i < 3; i++) await sc.post(u[name], `${name} ${round}.${i}`)
    }
  }

  /** Reposts of celebrity posts, unfollows, new follows, blocks, deletes, takedowns. */
  async function activity(sc: Sc): Promise<void> {
    await posts(sc, 2)
    const celebPosts = sc.posts[u.celeb]!
    await sc.repost(u.ann, celebPosts[3]!.ref)
    await sc.repost(u.eve, celebPosts[20]!.ref)
    const benRepost = await sc.repost(u.ben, sc.posts[u.cat]![1]!.ref)
    await sc.unfollow(u.cat, u.celeb) // the celebrity drops to four: still one
    await sc.unfollow(u.dev, u.celeb) // to three: no longer one, its items spread to followers
    await sc.follow(u.eve, u.ann) // a new follow brings ann's existing posts into eve's timeline
    await sc.unfollow(u.dev, u.ann)
    await sc.block(u.ann, u.cat)
    await sc.block(u.hyper, u.dev)
    // The stock's indexer applies different repos' events concurrently: cat's delete below could
    // land before ben's repost of that post is indexed, leaving the repost's item on the stock's
    // side only. Both sides take everything so far first.
    await settle()
    await sc.deletePost(u.celeb, celebPosts[22]!.ref.uri)
    await sc.deletePost(u.cat, sc.posts[u.cat]![1]!.ref.uri) // ben's repost of it goes too
    await sc.agent.app.bsky.feed.repost.delete(
      { repo: u.ann, rkey: (await sc.repost(u.ann, sc.posts[u.ben]![0]!.ref)).uri.rkey },
      sc.getHeaders(u.ann),
    )
    expect(benRepost.uri).toBeTruthy()
    await sc.post(u.ann, 'after the churn')
    await settle()
    // Takedowns go to both dataplanes, as an AppView's moderation calls would.
    for (const client of [net.stock, ours]) {
      await client.takedownRecord({ recordUri: sc.posts[u.ben]![2]!.ref.uriStr })
      await client.takedownActor({ did: u.eve, ref: 'mod-1' })
    }
  }

  async function settle(): Promise<void> {
    await net.network.processAll()
    const seq = (await net.network.pds.ctx.sequencer.curr()) ?? 0
    await waitForSeq(dataplane.url, seq)
    await waitForSeq(clustered.url, seq)
  }

  /** Reads every timeline until the store answers it (lists rebuild in the background). */
  async function warm(client = ours): Promise<void> {
    for (let round = 0; round < 3; round++) {
      for (const did of Object.values(u)) await client.getTimeline({ actorDid: did, limit: 50 })
      await new Promise((r) => setTimeout(r, 200))
    }
  }

  async function reads(path: string, reason: string, url = dataplane.url): Promise<number> {
    const text = await (await fetch(`${url}/metrics`)).text()
    const line = `openplane_timeline_reads_total{path="${path}",reason="${reason}"} `
    const found = text.split('\n').find((l) => l.startsWith(line))
    return Number(found?.slice(line.length) ?? 0)
  }
  const storeReads = (url = dataplane.url) => reads('store', '', url)

  /** Every page of every user's timeline at limits 1, 5, 50: ours equals the stock's. */
  async function sameRpcTimelines(client = ours): Promise<number> {
    let pages = 0
    for (const [name, did] of Object.entries(u)) {
      for (const limit of [1, 5, 50]) {
        let cursor = ''
        for (let page = 0; page < 80; page++) {
          const req = { actorDid: did, limit, cursor }
          const [stock, mine] = await Promise.all([
            net.stock.getTimeline(req),
            client.getTimeline(req),
          ])
          const view = (r: typeof stock) => ({
            items: r.items.map((i) => ({ uri: i.uri, repost: i.repost })),
            cursor: r.cursor,
          })
          expect({ name, limit, page, ...view(mine) }).toEqual({
            name,
            limit,
            page,
            ...view(stock),
          })
          pages++
          cursor = stock.cursor
          if (!cursor) break
        }
      }
    }
    return pages
  }

  async function sameAppViewTimelines(ofOurs = appview): Promise<void> {
    for (const did of Object.values(u)) {
      for (const limit of ['1', '5', '50']) {
        let cursor: string | undefined
        for (let page = 0; page < 80; page++) {
          const params = new URLSearchParams({ limit })
          if (cursor) params.set('cursor', cursor)
          const get = async (base: string) => {
            const nsid = 'app.bsky.feed.getTimeline'
            const headers = await net.network.serviceHeaders(did, nsid)
            const res = await fetch(`${base}/xrpc/${nsid}?${params}`, { headers })
            return { status: res.status, body: (await res.json()) as { cursor?: string } }
          }
          const [stock, mine] = await Promise.all([get(net.network.bsky.url), get(ofOurs.url)])
          expect({ did, limit, page, ...mine }).toEqual({ did, limit, page, ...stock })
          cursor = stock.body.cursor
          if (!cursor) break
        }
      }
    }
  }

  /** Everyone's first page comes from the store (deeper ones may pass a list's horizon). */
  async function firstPagesFromStore(client = ours, url = dataplane.url): Promise<void> {
    const before = await storeReads(url)
    const fell: string[] = []
    for (const [name, did] of Object.entries(u)) {
      const n = await storeReads(url)
      await client.getTimeline({ actorDid: did, limit: 5 })
      if ((await storeReads(url)) === n) fell.push(name)
    }
    const text = await (await fetch(`${url}/metrics`)).text()
    const why = text.split('\n').filter((l) => l.startsWith('openplane_timeline_reads_total'))
    expect({ fell, why }).toEqual({ fell: [], why })
    expect((await storeReads(url)) - before).toBe(USERS.length)
  }

  it('serves GetTimeline from the store and equals the stock, every page', async () => {
    await firstPagesFromStore()
    const before = await storeReads()
    const copied = await copiedLists()
    const pages = await sameRpcTimelines()
    expect(pages).toBeGreaterThan(100)
    expect((await storeReads()) - before).toBeGreaterThan(pages / 4)
    // Among the pages compared, reads that merged the second celebrity's list from the copy
    // this server keeps of it.
    expect((await copiedLists()) - copied).toBeGreaterThan(0)
  })

  it('on Redis Cluster: the same pages, first pages from the store', async () => {
    await warm(onCluster)
    await firstPagesFromStore(onCluster, clustered.url)
    expect(await sameRpcTimelines(onCluster)).toBeGreaterThan(100)
  })

  it('app.bsky.feed.getTimeline through the stock AppView equals the stock', async () => {
    await sameAppViewTimelines()
  })

  async function metric(url: string, name: string, labels: Record<string, string>) {
    const text = await (await fetch(`${url}/metrics`)).text()
    const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`)
    return text
      .split('\n')
      .filter((l) => /^[^ {]+/.exec(l)?.[0] === name && want.every((w) => l.includes(w)))
      .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0)
  }

  /** Celebrity lists a server's home reads merged from its copies of them. */
  const copiedLists = (url = dataplane.url) =>
    metric(url, 'openplane_timeline_celebrity_lists_total', { how: 'copy' })

  /** Follow checks of every pair, through the graph-backed rpcs: equal to the stock's. */
  async function sameFollows(client: DataplaneClient): Promise<void> {
    const dids = Object.values(u)
    for (const actorDid of dids) {
      const req = { actorDid, targetDids: dids }
      const [stock, mine] = await Promise.all([
        net.stock.getActorFollowsActors(req),
        client.getActorFollowsActors(req),
      ])
      expect(mine.uris).toEqual(stock.uris)
      const rel = { actorDid, targetDids: dids }
      const [stockRel, mineRel] = await Promise.all([
        net.stock.getRelationships(rel),
        client.getRelationships(rel),
      ])
      expect(mineRel.relationships).toEqual(stockRel.relationships)
    }
  }

  /** The follower caught up with the feed as the indexer's server has it now. */
  async function followerSettled(): Promise<void> {
    await settle()
    await waitForSeq(follower.url, 0)
  }

  async function followerServesFast(): Promise<void> {
    await followerSettled()
    await warm(onFollower)
    await firstPagesFromStore(onFollower, follower.url)
    const graphReads = () => metric(follower.url, 'openplane_graph_reads_total', { path: 'graph' })
    const sqlReads = () => metric(follower.url, 'openplane_graph_reads_total', { path: 'postgres' })
    const [g0, p0] = [await graphReads(), await sqlReads()]
    await sameFollows(onFollower)
    expect(await graphReads()).toBeGreaterThan(g0)
    expect(await sqlReads()).toBe(p0)
    const copied = await copiedLists(follower.url)
    expect(await sameRpcTimelines(onFollower)).toBeGreaterThan(100)
    expect((await copiedLists(follower.url)) - copied).toBeGreaterThan(0)
    await sameAppViewTimelines(followerAppView)
  }

  it('a server without the indexer answers from the store and its graph, equal to the stock', async () => {
    // The activity's follows and unfollows came after it started: it learnt them from the feed.
    const applied = await metric(follower.url, 'openplane_graph_feed_applied_total', {})
    expect(applied).toBeGreaterThan(0)
    await followerServesFast()
    // New follows, unfollows and posts now, read on both servers.
    await net.sc.follow(u.ben, u.eve)
    await net.sc.unfollow(u.ann, u.ben)
    await net.sc.post(u.eve, 'seen by ben now')
    await followerSettled()
    await sameFollows(onFollower)
    await sameFollows(ours)
    expect(await sameRpcTimelines(onFollower)).toBeGreaterThan(100)
    expect(await sameRpcTimelines()).toBeGreaterThan(100)
  })

  it('the server without the indexer, restarted, loads its graph and serves the same', async () => {
    const port = Number(new URL(follower.url).port)
    await followerAppView.stop()
    await follower.stop()
    follower = await spawnFollower(port)
    followerAppView = await spawnAppView(appViewEnvFor(net.network, follower.url))
    await net.sc.follow(u.cat, u.eve)
    await followerServesFast()
  })

  it('while Redis hangs, writes are lost: Postgres answers, then lists rebuild', async () => {
    redis.signal('SIGSTOP')
    try {
      await net.sc.post(u.ann, 'posted while redis hangs')
      await net.sc.repost(u.ben, net.sc.posts[u.celeb]![5]!.ref)
      await settle()
      const before = await storeReads()
      await sameRpcTimelines()
      expect(await storeReads()).toBe(before)
      expect(await reads('postgres', 'recovering')).toBeGreaterThan(0)
    } finally {
      redis.signal('SIGCONT')
    }
    // The lists that missed those writes are dropped; reads rebuild them.
    await new Promise((r) => setTimeout(r, 2500))
    await warm()
    await firstPagesFromStore()
    await sameRpcTimelines()
    await sameAppViewTimelines()
  })

  it('after a flush, timelines rebuild and stay equal', async () => {
    await redis.cli('FLUSHALL')
    await sameRpcTimelines()
    await warm()
    await net.sc.post(u.dev, 'after the flush')
    await settle()
    await firstPagesFromStore()
    await sameRpcTimelines()
  })

  it('with Redis down, Postgres answers; when it returns empty, timelines rebuild', async () => {
    await redis.stop()
    await net.sc.post(u.cat, 'posted while redis is down')
    await net.sc.follow(u.eve, u.cat)
    await settle()
    await sameRpcTimelines()
    await sameAppViewTimelines()
    await redis.restart()
    await new Promise((r) => setTimeout(r, 2500))
    await warm()
    await firstPagesFromStore()
    await sameRpcTimelines()
  })
})

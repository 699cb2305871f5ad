// The judge of correctness: the stock AppView on our dataplane (separate processes, HTTP/2,
// configured only by env) must answer exactly what the stock AppView on the stock dataplane
// answers, after the same user actions went through a real PDS and each side indexed its firehose.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { recountSchemaCounters } from '../harness/counters.ts'
import { PG_URL, uniqueName } from '../harness/env.ts'
import {
  appViewEnvFor,
  spawnAppView,
  spawnDataplane,
  waitForSeq,
  type Child,
} from '../harness/processes.ts'
import { playScenario } from '../harness/scenario.ts'
import { dropSchemas, startStockNetwork, type StockNetwork } from '../harness/stock-network.ts'

type Json = unknown

describe('stock AppView: our dataplane vs the stock dataplane', () => {
  let net: StockNetwork
  let dataplane: Child
  let appview: Child
  let dids: Record<string, string>
  const schema = uniqueName('op_e2e')

  beforeAll(async () => {
    net = await startStockNetwork()
    const { network } = net
    dataplane = await spawnDataplane({
      pgUrl: PG_URL,
      schema,
      plcUrl: network.plc.url,
      pdsUrl: network.pds.url,
    })
    appview = await spawnAppView(appViewEnvFor(network, dataplane.url))
    ;({ dids } = await playScenario(network, net.sc))
    await network.processAll()
    await waitForSeq(dataplane.url, (await network.pds.ctx.sequencer.curr()) ?? 0)
    // Our counters equal their rows at once; the stock's stay stale where rows went without a
    // recount (the deleted account's): recount them, the rule every differential uses.
    await recountSchemaCounters(net.schema)
  })

  afterAll(async () => {
    await appview?.stop()
    await dataplane?.stop()
    await net?.close()
    await dropSchemas([schema])
  })

  async function call(
    base: string,
    nsid: string,
    params: Record<string, string | string[]>,
    viewer?: string,
  ) {
    const url = new URL(`/xrpc/${nsid}`, base)
    for (const [k, v] of Object.entries(params)) {
      for (const one of Array.isArray(v) ? v : [v]) url.searchParams.append(k, one)
    }
    const headers = viewer ? await net.network.serviceHeaders(viewer, nsid) : {}
    const res = await fetch(url, { headers })
    return { status: res.status, body: (await res.json()) as Json }
  }

  /** Same status and deep-equal JSON from both AppViews. */
  async function same(nsid: string, params: Record<string, string | string[]>, viewer?: string) {
    const [stock, ours] = await Promise.all([
      call(net.network.bsky.url, nsid, params, viewer),
      call(appview.url, nsid, params, viewer),
    ])
    expect({ nsid, params, viewer, ...ours }).toEqual({ nsid, params, viewer, ...stock })
    return stock.body
  }

  const viewers = () => [undefined, dids.alice, dids.dan]

  it('getProfile / getProfiles', async () => {
    for (const viewer of viewers()) {
      for (const did of Object.values(dids))
        await same('app.bsky.actor.getProfile', { actor: did }, viewer)
      await same('app.bsky.actor.getProfile', { actor: 'bob.test' }, viewer)
      await same('app.bsky.actor.getProfiles', { actors: Object.values(dids) }, viewer)
    }
  })

  it('getAuthorFeed, every filter, walking cursors', async () => {
    const filters = [
      'posts_with_replies',
      'posts_no_replies',
      'posts_with_media',
      'posts_and_author_threads',
      'posts_with_video',
    ]
    for (const viewer of viewers()) {
      for (const did of Object.values(dids)) {
        for (const filter of filters) {
          let cursor: string | undefined
          for (let page = 0; page < 10; page++) {
            const params: Record<string, string> = { actor: did, filter, limit: '2' }
            if (cursor) params.cursor = cursor
            const body = (await same('app.bsky.feed.getAuthorFeed', params, viewer)) as {
              cursor?: string
            }
            cursor = body.cursor
            if (!cursor) break
          }
        }
      }
    }
  })

  it('getPosts, getLikes, getRepostedBy for every post', async () => {
    const uris = Object.values(net.sc.posts)
      .flat()
      .map((p) => p.ref.uriStr)
      .concat(
        Object.values(net.sc.replies)
          .flat()
          .map((p) => p.ref.uriStr),
      )
    expect(uris.length).toBeGreaterThan(5)
    for (const viewer of viewers()) {
      for (let i = 0; i < uris.length; i += 25) {
        await same('app.bsky.feed.getPosts', { uris: uris.slice(i, i + 25) }, viewer)
      }
      for (const uri of uris) {
        await same('app.bsky.feed.getLikes', { uri }, viewer)
        await same('app.bsky.feed.getRepostedBy', { uri }, viewer)
      }
    }
  })

  it('getFollowers / getFollows, walking cursors', async () => {
    for (const viewer of viewers()) {
      for (const did of Object.values(dids)) {
        for (const nsid of ['app.bsky.graph.getFollowers', 'app.bsky.graph.getFollows']) {
          await same(nsid, { actor: did }, viewer)
          const first = (await same(nsid, { actor: did, limit: '1' }, viewer)) as {
            cursor?: string
          }
          if (first.cursor)
            await same(nsid, { actor: did, limit: '1', cursor: first.cursor }, viewer)
        }
      }
    }
  })

  it('getTimeline, walking cursors', async () => {
    for (const viewer of Object.values(dids)) {
      for (const limit of ['1', '3', '50']) {
        let cursor: string | undefined
        for (let page = 0; page < 20; page++) {
          const params: Record<string, string> = { limit }
          if (cursor) params.cursor = cursor
          const body = (await same('app.bsky.feed.getTimeline', params, viewer)) as {
            cursor?: string
          }
          cursor = body.cursor
          if (!cursor) break
        }
      }
    }
  })

  it('getPostThread for every post, and notifications', async () => {
    const uris = Object.values(net.sc.posts)
      .flat()
      .map((p) => p.ref.uriStr)
      .concat(
        Object.values(net.sc.replies)
          .flat()
          .map((p) => p.ref.uriStr),
      )
    for (const viewer of viewers()) {
      for (const uri of uris) await same('app.bsky.feed.getPostThread', { uri }, viewer)
    }
    for (const viewer of Object.values(dids)) {
      await same('app.bsky.notification.listNotifications', { limit: '50' }, viewer)
      await same('app.bsky.notification.getUnreadCount', {}, viewer)
    }
  })
})

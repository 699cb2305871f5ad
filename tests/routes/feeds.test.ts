// Feeds and threads, differentially: author feeds of every kind, timelines (with the stock's
// own-post merge and cursor rules), list feeds and threads with OP-thread resolution.
import { randomBytes } from 'node:crypto'
import path from 'node:path'
import { Code } from '@connectrpc/connect'
import type { RecordRef } from '@atproto/dev-env'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startOurServer, type OurServer } from '../harness/ours.ts'
import { createUser, IMAGES, seedBasic } from '../harness/seed.ts'
import { startStockNetwork, type StockNetwork } from '../harness/stock-network.ts'
import { didsOf, differ, WALK_LIMITS, type Differ } from './diff.ts'

const FEED_TYPES = [0, 1, 2, 3, 4] as const
const MISSING_DID = 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa'
const BAD_CURSORS = ['abc', '123', 'x__bafy', '1__2__3', '__bafy']

describe('feed and thread routes', () => {
  let net: StockNetwork
  let ours: OurServer
  let d: Differ
  let dids: Record<string, string>
  const lists: Record<string, string> = {}
  const threads: Record<string, string> = {}

  beforeAll(async () => {
    net = await startStockNetwork()
    dids = await seedBasic(net.sc)
    for (const name of ['eve', 'fred', 'gina', 'hank']) dids[name] = await createUser(net.sc, name)
    await seedFeeds(net, dids, lists, threads)
    await net.network.processAll()
    ours = await startOurServer({
      schema: net.schema,
      plcUrl: net.network.plc.url,
      pdsUrl: net.network.pds.url,
    })
    d = differ(net.clientFor(ours.server.url), net.stock)
  })
  afterAll(async () => {
    await ours?.close()
    await net?.close()
  })

  const actors = () => [...Object.values(dids), MISSING_DID]

  it('GetAuthorFeed: every feed type for every actor, walked at several limits', async () => {
    let items = 0
    for (const actorDid of actors()) {
      for (const feedType of FEED_TYPES) {
        for (const limit of WALK_LIMITS) {
          const pages = await d.walk(
            `author ${actorDid} type ${feedType} limit ${limit}`,
            (c, cursor) => c.getAuthorFeed({ actorDid, feedType, limit, cursor }),
          )
          items += pages.reduce((n, p) => n + p.items.length, 0)
        }
      }
    }
    expect(items).toBeGreaterThan(200)
  })

  it('GetAuthorFeed: media, video and author-thread filters select what they should', async () => {
    const feed = async (actor: string, feedType: number) =>
      (
        await d.same('filter', (c) =>
          c.getAuthorFeed({ actorDid: dids[actor]!, feedType, limit: 100 }),
        )
      ).items
    expect((await feed('eve', 4)).map((i) => i.uri)).toEqual([threads.eveVideo])
    expect((await feed('fred', 3)).map((i) => i.uri)).toEqual([threads.fredGallery])
    // eve's feed: replies in her own threads stay, the reply in alice's thread goes.
    const all = await feed('eve', 0)
    const authorThreads = await feed('eve', 1)
    expect(all.length).toBeGreaterThan(authorThreads.length)
    expect(authorThreads.some((i) => i.repost)).toBe(true)
  })

  it('GetAuthorFeed: limit 0 is an empty page; cursors past the end are empty', async () => {
    const actorDid = dids.bob!
    await d.same('limit 0', (c) => c.getAuthorFeed({ actorDid, limit: 0 }))
    await d.same('old cursor', (c) => c.getAuthorFeed({ actorDid, limit: 10, cursor: '0__bafy' }))
    const future = `${Date.now() + 86_400_000}__bafy`
    await d.same('future cursor', (c) => c.getAuthorFeed({ actorDid, limit: 10, cursor: future }))
  })

  it('GetTimeline: every actor, walked at limits that hit each cursor rule', async () => {
    for (const actorDid of actors()) {
      for (const limit of [...WALK_LIMITS, 10, 15, 20]) {
        await d.walk(`timeline ${actorDid} limit ${limit}`, (c, cursor) =>
          c.getTimeline({ actorDid, limit, cursor }),
        )
      }
    }
  })

  it('GetTimeline: own posts cut by their cap still leave a cursor', async () => {
    // hank follows gina (8 items) and has 15 own: at limit 20, 8 + 12 fill the page exactly and
    // the cursor comes only from own posts having more.
    const page = await d.same('hank 20', (c) =>
      c.getTimeline({ actorDid: dids.hank!, limit: 20, cursor: '' }),
    )
    expect(page.items.length).toBe(20)
    expect(page.cursor).not.toBe('')
  })

  it('GetListFeed: curate and reference lists (opt-outs excluded), walked', async () => {
    for (const listUri of [
      lists.curate!,
      lists.reference!,
      `at://${MISSING_DID}/app.bsky.graph.list/x`,
    ]) {
      for (const limit of WALK_LIMITS) {
        await d.walk(`list ${listUri} limit ${limit}`, (c, cursor) =>
          c.getListFeed({ listUri, limit, cursor }),
        )
      }
    }
    const reference = await d.same('reference', (c) =>
      c.getListFeed({ listUri: lists.reference!, limit: 100 }),
    )
    expect(reference.items.some((i) => i.uri.includes(dids.carol!))).toBe(false)
    expect(reference.items.some((i) => i.uri.includes(dids.bob!))).toBe(true)
  })

  it('GetThread: every post at several heights and depths', async () => {
    const posts = await ours.db.db.selectFrom('post').select('uri').execute()
    const uris = [...posts.map((p) => p.uri), `at://${MISSING_DID}/app.bsky.feed.post/x`]
    const shapes = [
      [0, 0],
      [1, 1],
      [2, 3],
      [80, 6],
      [-1, -1],
    ] as const
    for (const postUri of uris) {
      for (const [above, below] of shapes) {
        await d.same(`thread ${postUri} ${above}/${below}`, (c) =>
          c.getThread({ postUri, above, below }),
        )
      }
    }
  })

  it('GetThread: OP threads keep deleted slots and hand vacated ones to later replies', async () => {
    const deep = await d.same('deep', (c) =>
      c.getThread({ postUri: threads.deepLeaf!, above: 100, below: 10 }),
    )
    expect(deep.uris.length).toBeGreaterThan(10)
    const kept = await d.same('kept', (c) =>
      c.getThread({ postUri: threads.keptRoot!, above: 0, below: 10 }),
    )
    expect(kept.opThread).toHaveLength(4)
    const vacated = await d.same('vacated', (c) =>
      c.getThread({ postUri: threads.vacatedRoot!, above: 0, below: 10 }),
    )
    expect(vacated.opThread).toEqual([threads.vacatedRoot, threads.vacatedClaim])
  })

  it('malformed cursors are InvalidArgument', async () => {
    const actorDid = dids.alice!
    for (const cursor of BAD_CURSORS) {
      await d.bothReject(
        `author ${cursor}`,
        (c) => c.getAuthorFeed({ actorDid, cursor, limit: 5 }),
        Code.InvalidArgument,
      )
      await d.bothReject(
        `timeline ${cursor}`,
        (c) => c.getTimeline({ actorDid, cursor, limit: 5 }),
        Code.InvalidArgument,
      )
      await d.bothReject(
        `list ${cursor}`,
        (c) => c.getListFeed({ listUri: lists.curate!, cursor, limit: 5 }),
        Code.InvalidArgument,
      )
    }
  })
})

type Net = StockNetwork

/** Threads, media, many posts, lists; fills `lists` and `threads` with the uris tests name. */
async function seedFeeds(
  net: Net,
  dids: Record<string, string>,
  lists: Record<string, string>,
  threads: Record<string, string>,
): Promise<void> {
  const sc = net.sc
  const { alice, bob, carol, dan, eve, fred, gina, hank } = didsOf(
    dids,
    'alice',
    'bob',
    'carol',
    'dan',
    'eve',
    'fred',
    'gina',
    'hank',
  )

  // eve: a self thread, replies in alice's thread, a detached thread with fred, a repost.
  const eveRoot = (await sc.post(eve, 'eve own thread')).ref
  let parent = eveRoot
  for (const text of ['own 1', 'own 2', 'own 3'])
    parent = (await sc.reply(eve, eveRoot, parent, text)).ref
  const aliceRoot = sc.posts[alice]![1]!.ref
  const toAlice = await sc.reply(eve, aliceRoot, aliceRoot, 'eve to alice')
  await sc.reply(eve, aliceRoot, toAlice.ref, 'eve to alice 2')
  const detached = (await sc.post(eve, 'eve detached')).ref
  const fredReply = await sc.reply(fred, detached, detached, 'fred to eve')
  const eveToFred = await sc.reply(eve, detached, fredReply.ref, 'eve to fred')
  await sc.reply(eve, detached, eveToFred.ref, 'eve to fred 2')
  await sc.repost(eve, fredReply.ref)

  // Media: a video by eve, a gallery by fred (the api package's post type predates galleries).
  const video = await sc.agent.com.atproto.repo.uploadBlob(randomBytes(2048), {
    headers: sc.getHeaders(eve),
    encoding: 'video/mp4',
  })
  const eveVideo = await sc.post(eve, 'a video', undefined, undefined, undefined, {
    embed: { $type: 'app.bsky.embed.video', video: video.data.blob, alt: 'clip' },
  })
  threads.eveVideo = eveVideo.ref.uriStr
  const img = await sc.uploadFile(fred, path.join(IMAGES, 'landscape.jpg'), 'image/jpeg')
  const gallery = await sc.post(fred, 'a gallery', undefined, undefined, undefined, {
    embed: {
      $type: 'app.bsky.embed.gallery',
      items: [
        {
          $type: 'app.bsky.embed.gallery#image',
          image: img.image,
          alt: 'one',
          aspectRatio: { width: 4, height: 3 },
        },
      ],
    },
  } as never)
  threads.fredGallery = gallery.ref.uriStr

  // Volume for pagination: alice and bob interleaved, gina 8, hank 15. gina follows herself, so
  // her own items come through both halves of her timeline.
  for (let i = 0; i < 12; i++) {
    await sc.post(alice, `alice ${i}`)
    await sc.post(bob, `bob ${i}`)
  }
  for (let i = 0; i < 8; i++) await sc.post(gina, `gina ${i}`)
  for (let i = 0; i < 15; i++) await sc.post(hank, `hank ${i}`)
  await sc.follow(hank, gina)
  await sc.follow(gina, hank)
  await sc.follow(gina, gina)
  await sc.repost(bob, sc.posts[carol]![0]!.ref)
  await sc.repost(alice, sc.posts[bob]![3]!.ref)

  // A deep chain with branches.
  const deepRoot = (await sc.post(carol, 'deep root')).ref
  let deep: RecordRef = deepRoot
  for (let i = 0; i < 14; i++) {
    deep = (await sc.reply(i % 2 ? carol : dan, deepRoot, deep, `deep ${i}`)).ref
    if (i % 4 === 0) await sc.reply(bob, deepRoot, deep, `branch ${i}`)
  }
  threads.deepLeaf = deep.uriStr

  // OP threads. Kept: a deleted OP reply with a surviving reply below keeps its slot.
  const keptRoot = (await sc.post(gina, 'kept root')).ref
  const k1 = await sc.reply(gina, keptRoot, keptRoot, 'k1')
  const k2 = await sc.reply(gina, keptRoot, k1.ref, 'k2')
  await sc.reply(gina, keptRoot, k2.ref, 'k3')
  await sc.reply(gina, keptRoot, keptRoot, 'k1 sibling')
  await sc.reply(bob, keptRoot, k1.ref, 'not op')
  await net.network.processAll()
  await sc.deletePost(gina, k2.ref.uri)
  threads.keptRoot = keptRoot.uriStr
  // Vacated: a deleted leaf frees its slot only for replies written after the deletion.
  const vacatedRoot = (await sc.post(gina, 'vacated root')).ref
  const v1 = await sc.reply(gina, vacatedRoot, vacatedRoot, 'v1')
  await sc.reply(gina, vacatedRoot, vacatedRoot, 'v2 older sibling')
  await net.network.processAll()
  await sc.deletePost(gina, v1.ref.uri)
  await net.network.processAll()
  await new Promise((r) => setTimeout(r, 5))
  const claim = await sc.reply(gina, vacatedRoot, vacatedRoot, 'v3 claims')
  threads.vacatedRoot = vacatedRoot.uriStr
  threads.vacatedClaim = claim.ref.uriStr

  // Lists: a curate list and a reference list that carol opts out of.
  const curate = await sc.createList(alice, 'curated', 'curate')
  await sc.addToList(alice, bob, curate)
  await sc.addToList(alice, carol, curate)
  const reference = await sc.createList(alice, 'reference', 'reference')
  for (const m of [bob, carol, dan]) await sc.addToList(alice, m, reference)
  await sc.agent.com.atproto.repo.createRecord(
    {
      repo: carol,
      collection: 'app.bsky.graph.referencelistoptout',
      record: {
        $type: 'app.bsky.graph.referencelistoptout',
        subject: reference.uriStr,
        createdAt: new Date().toISOString(),
      },
    },
    { headers: sc.getHeaders(carol) },
  )
  lists.curate = curate.uriStr
  lists.reference = reference.uriStr
}

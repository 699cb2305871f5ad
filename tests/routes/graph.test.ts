// Route-level differential test for the social-graph and interaction rpcs (follows, likes,
// reposts, quotes, relationships, blocks, known followers/likers, starter packs) and the private
// stash-keyed ones (bookmarks, activity subscriptions): pagination walks with cursors included.
import type { SeedClient, TestNetwork } from '@atproto/dev-env'
import { registry } from '@openplane/telemetry'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startOurServer, type OurServer } from '../harness/ours.ts'
import { createUser, seedBasic } from '../harness/seed.ts'
import { startStockNetwork, type StockNetwork } from '../harness/stock-network.ts'
import { differential, walkPages, type Differential } from './differential.ts'

type Did = `did:${string}:${string}`
type Sc = SeedClient<TestNetwork>

const MISSING_DID = 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa'
// Several records share this createdAt, so pages must break sortAt ties by cid.
const TIED = '2024-01-01T00:00:00.000Z'

describe('graph and interaction routes', () => {
  let net: StockNetwork
  let ours: OurServer
  let diff: Differential
  let sc: Sc
  let dids: Did[]
  let alice: Did, bob: Did, carol: Did, dan: Did
  let posts: string[]

  beforeAll(async () => {
    net = await startStockNetwork()
    sc = net.sc
    await seedBasic(sc)
    ;({ alice, bob, carol, dan } = sc.dids as Record<string, Did> as {
      alice: Did
      bob: Did
      carol: Did
      dan: Did
    })
    await seedCrowd(sc)
    await net.network.processAll()
    ours = await startOurServer({
      schema: net.schema,
      plcUrl: net.network.plc.url,
      pdsUrl: net.network.pds.url,
    })
    diff = differential(net.clientFor(ours.server.url), net.stock)
    await seedPrivate(ours, sc)
    dids = Object.values(sc.dids)
    const rows = await ours.db.db.selectFrom('post').select('uri').orderBy('uri').execute()
    posts = rows.map((r) => r.uri)
  })
  afterAll(async () => {
    await ours?.close()
    await net?.close()
  })

  const walkAll = async (
    method: Parameters<typeof walkPages>[1],
    reqs: Record<string, unknown>[],
    limits = [1, 2, 3, 50],
  ) => {
    for (const req of reqs) {
      for (const limit of limits) await walkPages(diff, method, { ...req, limit } as never)
    }
  }

  it('GetFollowers / GetFollows: every actor, walked page by page', async () => {
    const reqs = [...dids, MISSING_DID].map((actorDid) => ({ actorDid }))
    await walkAll('getFollowers', reqs)
    await walkAll('getFollows', reqs)
    await diff.same('getFollows', { actorDid: alice, limit: 0 })
  })

  it('GetActorFollowsActors', async () => {
    for (const actorDid of [...dids, MISSING_DID]) {
      await diff.same('getActorFollowsActors', { actorDid, targetDids: [...dids, MISSING_DID] })
    }
    await diff.same('getActorFollowsActors', { actorDid: alice, targetDids: [] })
  })

  it('GetLikesBySubject(Sorted), GetRepostsBySubject, GetQuotesBySubjectSorted: every post', async () => {
    const reqs = [...posts, 'at://did:plc:x/app.bsky.feed.post/missing'].map((uri) => ({
      subject: { uri },
    }))
    await walkAll('getLikesBySubjectSorted', reqs)
    await walkAll('getLikesBySubject', reqs, [2])
    await walkAll('getRepostsBySubject', reqs)
    await walkAll('getQuotesBySubjectSorted', reqs)
    for (const method of [
      'getLikesBySubjectSorted',
      'getRepostsBySubject',
      'getQuotesBySubjectSorted',
    ] as const) {
      await diff.same(method, { limit: 10 })
    }
  })

  it('GetActorLikes, GetActorReposts, GetActorStarterPacks: every actor', async () => {
    const reqs = [...dids, MISSING_DID].map((actorDid) => ({ actorDid }))
    await walkAll('getActorLikes', reqs)
    await walkAll('getActorReposts', reqs)
    await walkAll('getActorStarterPacks', reqs)
  })

  it('GetLikesByActorAndSubjects, GetRepostsByActorAndSubjects', async () => {
    const refs = [...posts, 'at://did:plc:x/app.bsky.feed.post/missing', posts[0]!].map((uri) => ({
      uri,
    }))
    for (const actorDid of [...dids, MISSING_DID]) {
      await diff.same('getLikesByActorAndSubjects', { actorDid, refs })
      await diff.same('getRepostsByActorAndSubjects', { actorDid, refs })
    }
    await diff.same('getLikesByActorAndSubjects', { actorDid: alice, refs: [] })
    await diff.same('getRepostsByActorAndSubjects', { actorDid: alice, refs: [] })
  })

  it('GetKnownLikers', async () => {
    const subjectUris = [...posts, posts[0]!, 'at://did:plc:x/app.bsky.feed.post/missing']
    for (const actorDid of [...dids, MISSING_DID, '']) {
      for (const limit of [0, 1, 2, 5, 100]) {
        await diff.same('getKnownLikers', { actorDid, subjectUris, limit })
      }
    }
    await diff.same('getKnownLikers', { actorDid: alice, subjectUris: [], limit: 5 })
  })

  it('GetFollowsFollowing', async () => {
    for (const actorDid of [...dids, MISSING_DID, '']) {
      await diff.same('getFollowsFollowing', {
        actorDid,
        targetDids: [...dids, MISSING_DID, dids[0]!],
      })
    }
    await diff.same('getFollowsFollowing', { actorDid: alice, targetDids: [] })
  })

  it('GetRelationships: follows, blocks, list blocks, mutes, list mutes', async () => {
    for (const actorDid of [...dids, MISSING_DID, '']) {
      await diff.same('getRelationships', {
        actorDid,
        targetDids: [...dids, MISSING_DID, dids[1]!],
      })
    }
    await diff.same('getRelationships', { actorDid: alice, targetDids: [] })
  })

  it('with the in-memory graph: GetFollowsFollowing, GetActorFollowsActors, GetRelationships', async () => {
    const withGraph = await startOurServer({
      schema: net.schema,
      plcUrl: net.network.plc.url,
      pdsUrl: net.network.pds.url,
      graph: true,
    })
    try {
      const g = differential(net.clientFor(withGraph.server.url), net.stock)
      const targetDids = [...dids, MISSING_DID, dids[1]!]
      for (const actorDid of [...dids, MISSING_DID]) {
        await g.same('getFollowsFollowing', { actorDid, targetDids })
        await g.same('getActorFollowsActors', { actorDid, targetDids })
        await g.same('getRelationships', { actorDid, targetDids })
      }
    } finally {
      await withGraph.close()
    }
  })

  it('GetBlockExistence: every ordered pair, and both orders in one request', async () => {
    const all = [...dids, MISSING_DID]
    const pairs = all.flatMap((a) => all.map((b) => ({ a, b })))
    await diff.same('getBlockExistence', { pairs })
    for (const pair of pairs) await diff.same('getBlockExistence', { pairs: [pair] })
    await diff.same('getBlockExistence', {
      pairs: [
        { a: dan, b: carol },
        { a: carol, b: dan },
      ],
    })
    await diff.same('getBlockExistence', { pairs: [] })
  })

  it('GetActorBookmarks, GetBookmarksByActorAndSubjects', async () => {
    await walkAll(
      'getActorBookmarks',
      [...dids, MISSING_DID].map((actorDid) => ({ actorDid })),
    )
    for (const actorDid of [alice, bob, MISSING_DID]) {
      await diff.same('getBookmarksByActorAndSubjects', {
        actorDid,
        uris: [...posts, 'at://did:plc:x/app.bsky.feed.post/missing', posts[0]!],
      })
    }
    await diff.same('getBookmarksByActorAndSubjects', { actorDid: alice, uris: [] })
  })

  it('viewer state and labels asked at once, as for a page: answers unchanged, fewer statements', async () => {
    const client = net.clientFor(ours.server.url)
    const refs = [...posts, 'at://did:plc:x/app.bsky.feed.post/missing', posts[0]!].map((uri) => ({
      uri,
    }))
    const uris = refs.map((ref) => ref.uri)
    // Thread mutes, as bsync's subscription writes them (the schema is shared with the stock's).
    const mutes = [posts[0]!, posts[2]!].map((rootUri) => ({
      mutedByDid: alice,
      rootUri,
      createdAt: new Date().toISOString(),
    }))
    await ours.db.db.insertInto('thread_mute').values(mutes).execute()
    try {
      const labelled = await ours.db.db.selectFrom('label').select(['uri', 'src']).execute()
      const issuers = [...new Set([...labelled.map((l) => l.src), alice])]
      const asks: { method: string; req: object }[] = [...dids, MISSING_DID].flatMap((actorDid) => [
        { method: 'getLikesByActorAndSubjects', req: { actorDid, refs } },
        { method: 'getRepostsByActorAndSubjects', req: { actorDid, refs } },
        { method: 'getBookmarksByActorAndSubjects', req: { actorDid, uris } },
        { method: 'getThreadMutesOnSubjects', req: { actorDid, threadRoots: uris } },
        // The same kind twice for one viewer, on other subjects.
        { method: 'getLikesByActorAndSubjects', req: { actorDid, refs: refs.slice(1, 3) } },
      ])
      asks.push(
        { method: 'getLabels', req: { subjects: [...dids, ...uris], issuers } },
        { method: 'getLabels', req: { subjects: uris.slice(0, 2), issuers } },
        { method: 'getLabels', req: { subjects: dids, issuers: [alice] } },
      )
      const counts = async () => {
        const [reads, statements] = await Promise.all(
          [
            'openplane_dataplane_batched_reads_total',
            'openplane_dataplane_batch_statements_total',
          ].map(async (name) => {
            const metric = registry.getSingleMetric(name)
            const values = metric ? (await metric.get()).values : []
            return values.reduce((sum, v) => sum + v.value, 0)
          }),
        )
        return { reads: reads ?? 0, statements: statements ?? 0 }
      }
      const before = await counts()
      const call = (c: typeof client, method: string, req: unknown) =>
        (c as unknown as Record<string, (r: unknown) => Promise<{ toJson(): unknown }>>)[
          method
        ]!.call(c, req)
      // All of ours at once (one turn), the stock's one by one.
      const answers = await Promise.all(asks.map(({ method, req }) => call(client, method, req)))
      const after = await counts()
      for (const [i, { method, req }] of asks.entries()) {
        const stock = await call(net.stock, method, req)
        expect(answers[i]!.toJson(), `${method} ${JSON.stringify(req)}`).toEqual(stock.toJson())
      }
      expect(after.reads - before.reads).toBe(asks.length)
      // At best one statement a viewer and one a set of labelers, if all arrived in one turn;
      // without batching, one a read.
      const statements = after.statements - before.statements
      expect(statements).toBeGreaterThanOrEqual(dids.length + 1 + 1)
      expect(statements).toBeLessThan(asks.length / 2)
      const muted = answers.some(
        (a, i) =>
          asks[i]!.method === 'getThreadMutesOnSubjects' &&
          (a.toJson() as { muted?: boolean[] }).muted?.some(Boolean),
      )
      expect(muted).toBe(true)
    } finally {
      await ours.db.db
        .deleteFrom('thread_mute')
        .where('mutedByDid', '=', alice)
        .where(
          'rootUri',
          'in',
          mutes.map((m) => m.rootUri),
        )
        .execute()
    }
  })

  it('GetActivitySubscriptionDids, GetActivitySubscriptionsByActorAndSubjects', async () => {
    await walkAll(
      'getActivitySubscriptionDids',
      [...dids, MISSING_DID].map((actorDid) => ({ actorDid })),
    )
    for (const actorDid of [alice, bob, MISSING_DID]) {
      await diff.same('getActivitySubscriptionsByActorAndSubjects', {
        actorDid,
        subjectDids: [...dids, MISSING_DID, dids[1]!],
      })
    }
    await diff.same('getActivitySubscriptionsByActorAndSubjects', {
      actorDid: alice,
      subjectDids: [],
    })
  })

  it('malformed cursors are refused by both', async () => {
    for (const cursor of ['abc', '1__2__3', '__x', 'notanumber__cid']) {
      await diff.bothReject('getFollowers', { actorDid: alice, limit: 5, cursor })
      await diff.bothReject('getActorLikes', { actorDid: alice, limit: 5, cursor })
      await diff.bothReject('getRepostsBySubject', {
        subject: { uri: posts[0]! },
        limit: 5,
        cursor,
      })
    }
    for (const cursor of ['a__b', 'bad key!', '..']) {
      await diff.bothReject('getActorBookmarks', { actorDid: alice, limit: 5, cursor })
      await diff.bothReject('getActivitySubscriptionDids', { actorDid: alice, limit: 5, cursor })
    }
  })

  // Last, since it adds records: the stock's scalar subqueries fail when two blocked lists name
  // the same actor; we answer with one of the lists.
  it('two list blocks naming the same actor: the stock fails, we answer', async () => {
    const second = await sc.createList(carol, 'more mods', 'mod')
    await sc.addToList(carol, dan, second)
    await sc.agent.app.bsky.graph.listblock.create(
      { repo: alice },
      { subject: second.uriStr, createdAt: new Date().toISOString() },
      sc.getHeaders(alice),
    )
    await net.network.processAll()
    const req = { actorDid: alice, targetDids: [dan] }
    await expect(net.stock.getRelationships(req)).rejects.toThrow()
    const client = net.clientFor(ours.server.url)
    const res = await client.getRelationships(req)
    const listUris = await ours.db.db
      .selectFrom('list_item')
      .innerJoin('list_block', 'list_block.subjectUri', 'list_item.listUri')
      .where('list_block.creator', '=', alice)
      .where('list_item.subjectDid', '=', dan)
      .select('list_item.listUri')
      .execute()
    expect(listUris.length).toBe(2)
    expect(res.relationships[0]!.blockingByList).toBe(listUris.map((r) => r.listUri).sort()[0])
  })
})

/** More actors and interactions than seedBasic has, so that pages run several deep. */
async function seedCrowd(sc: Sc): Promise<void> {
  const { alice, bob, carol, dan } = sc.dids as Record<string, Did>
  const crowd: Did[] = []
  for (let i = 0; i < 6; i++) crowd.push((await createUser(sc, `user${i}`)) as Did)
  const target = sc.posts[alice!]![0]!.ref
  const quoted = sc.posts[bob!]![0]!.ref
  for (const [i, did] of crowd.entries()) {
    const tied = i % 2 === 0 ? { createdAt: TIED } : {}
    await sc.follow(did, alice!, tied)
    await sc.follow(alice!, did, tied)
    if (i < 4) await sc.follow(did, bob!)
    await sc.like(did, target, tied)
    await sc.like(did, quoted)
    await sc.repost(did, target, tied)
    await sc.post(did, `quoting ${i}`, undefined, undefined, quoted, tied)
  }
  // Alice likes and reposts a lot, some at the same instant.
  for (const [i, p] of [...sc.posts[bob!]!, ...sc.posts[carol!]!, ...sc.posts[dan!]!].entries()) {
    await sc.like(alice!, p.ref, i % 2 ? { createdAt: TIED } : {})
    await sc.repost(alice!, p.ref, i % 2 ? { createdAt: TIED } : {})
  }
  // Starter packs, blocks (direct and via a list), a list nobody blocks.
  for (const name of ['one', 'two', 'three']) await sc.createStarterPack(alice!, name, [bob!])
  await sc.block(dan!, carol!)
  await sc.block(crowd[0]!, alice!)
  const mods = await sc.createList(bob!, 'mods', 'mod')
  await sc.addToList(bob!, dan!, mods)
  await sc.addToList(bob!, crowd[1]!, mods)
  await sc.agent.app.bsky.graph.listblock.create(
    { repo: alice! },
    { subject: mods.uriStr, createdAt: new Date().toISOString() },
    sc.getHeaders(alice!),
  )
  await sc.agent.app.bsky.graph.listblock.create(
    { repo: crowd[1]! },
    { subject: mods.uriStr, createdAt: new Date().toISOString() },
    sc.getHeaders(crowd[1]!),
  )
  const curate = await sc.createList(carol!, 'friends', 'curate')
  await sc.addToList(carol!, bob!, curate)
}

/** Mutes, list mutes, bookmarks and activity subscriptions live in bsync; write them directly. */
async function seedPrivate(ours: OurServer, sc: Sc): Promise<void> {
  const db = ours.db.db
  const { alice, bob, carol, dan } = sc.dids as Record<string, Did>
  const now = new Date().toISOString()
  await db
    .insertInto('mute')
    .values([
      { mutedByDid: alice!, subjectDid: bob!, createdAt: now },
      { mutedByDid: alice!, subjectDid: carol!, createdAt: now, onlyReposts: true },
      { mutedByDid: alice!, subjectDid: dan!, createdAt: now, onlyQuoteposts: true },
      {
        mutedByDid: bob!,
        subjectDid: alice!,
        createdAt: now,
        onlyReposts: true,
        onlyQuoteposts: true,
      },
    ])
    .execute()
  const curate = await db
    .selectFrom('list')
    .where('creator', '=', carol!)
    .where('purpose', '=', 'app.bsky.graph.defs#curatelist')
    .select('uri')
    .executeTakeFirstOrThrow()
  await db
    .insertInto('list_mute')
    .values({ listUri: curate.uri, mutedByDid: dan!, createdAt: now })
    .execute()
  const posts = await db.selectFrom('post').select(['uri', 'cid']).orderBy('uri').limit(7).execute()
  await db
    .insertInto('bookmark')
    .values(
      posts.map((p, i) => ({
        creator: alice!,
        key: `3kbookmark${String.fromCharCode(97 + i)}22`,
        subjectUri: p.uri,
        subjectCid: p.cid,
        indexedAt: new Date(Date.UTC(2025, 0, 1 + i)).toISOString(),
      })),
    )
    .execute()
  await db
    .insertInto('bookmark')
    .values({
      creator: bob!,
      key: '3kbookmarkz22',
      subjectUri: posts[0]!.uri,
      subjectCid: posts[0]!.cid,
      indexedAt: now,
    })
    .execute()
  const subjects = [bob!, carol!, dan!, ...Object.values(sc.dids).slice(4)]
  await db
    .insertInto('activity_subscription')
    .values(
      subjects.map((subjectDid, i) => ({
        creator: alice!,
        subjectDid,
        key: `3ksubscript${String.fromCharCode(97 + i)}2`,
        indexedAt: now,
        post: i % 2 === 0,
        reply: i % 3 === 0,
      })),
    )
    .execute()
}

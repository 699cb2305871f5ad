// Route-level differential test for the record, actor, label, sync and count rpcs: the stock
// dataplane and ours read the schema the stock indexer filled and must answer alike.
import { EXAMPLE_LABELER, type SeedClient, type TestNetwork } from '@atproto/dev-env'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startOurServer, type OurServer } from '../harness/ours.ts'
import { createUser, seedBasic, setProfile } from '../harness/seed.ts'
import {
  startStockNetwork,
  type DataplaneClient,
  type StockNetwork,
} from '../harness/stock-network.ts'
import { differential, type Differential } from './differential.ts'

type Did = `did:${string}:${string}`

const RECORD_RPCS = {
  getBlockRecords: 'app.bsky.graph.block',
  getFeedGeneratorRecords: 'app.bsky.feed.generator',
  getFollowRecords: 'app.bsky.graph.follow',
  getLikeRecords: 'app.bsky.feed.like',
  getListBlockRecords: 'app.bsky.graph.listblock',
  getListItemRecords: 'app.bsky.graph.listitem',
  getListRecords: 'app.bsky.graph.list',
  getPostRecords: 'app.bsky.feed.post',
  getProfileRecords: 'app.bsky.actor.profile',
  getActorChatDeclarationRecords: 'chat.bsky.actor.declaration',
  getNotificationDeclarationRecords: 'app.bsky.notification.declaration',
  getGermDeclarationRecords: 'com.germnetwork.declaration',
  getStatusRecords: 'app.bsky.actor.status',
  getRepostRecords: 'app.bsky.feed.repost',
  getThreadGateRecords: 'app.bsky.feed.threadgate',
  getPostgateRecords: 'app.bsky.feed.postgate',
  getLabelerRecords: 'app.bsky.labeler.service',
  getStarterPackRecords: 'app.bsky.graph.starterpack',
  getVerificationRecords: 'app.bsky.graph.verification',
} as const satisfies Partial<Record<keyof DataplaneClient, string>>

const MISSING_DID = 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa'

describe('record, actor, label and count routes', () => {
  let net: StockNetwork
  let ours: OurServer
  let diff: Differential
  let sc: SeedClient<TestNetwork>
  let dids: Did[]
  let urisByCollection: Map<string, string[]>
  let allUris: string[]
  let allPosts: string[]
  let opRoots: { alice: string; dan: string; synthetic: string }

  beforeAll(async () => {
    net = await startStockNetwork()
    sc = net.sc
    await seedBasic(sc)
    await net.network.processAll()
    opRoots = await seedExtras(sc)
    await net.network.processAll()
    ours = await startOurServer({
      schema: net.schema,
      plcUrl: net.network.plc.url,
      pdsUrl: net.network.pds.url,
    })
    diff = differential(net.clientFor(ours.server.url), net.stock)
    await seedDirect(ours, sc, opRoots)
    const rows = await ours.db.db.selectFrom('record').select('uri').orderBy('uri').execute()
    allUris = rows.map((r) => r.uri)
    urisByCollection = new Map()
    for (const uri of allUris) {
      const collection = uri.split('/')[3]!
      urisByCollection.set(collection, [...(urisByCollection.get(collection) ?? []), uri])
    }
    allPosts = urisByCollection.get('app.bsky.feed.post') ?? []
    dids = Object.values(sc.dids)
  })
  afterAll(async () => {
    await ours?.close()
    await net?.close()
  })

  it('the seed indexed a record of every collection', () => {
    for (const collection of Object.values(RECORD_RPCS)) {
      expect(urisByCollection.get(collection)?.length, collection).toBeGreaterThan(0)
    }
  })

  for (const [rpc, collection] of Object.entries(RECORD_RPCS) as [
    keyof typeof RECORD_RPCS,
    string,
  ][]) {
    it(`${rpc}: own collection, missing, foreign, duplicate and empty uris`, async () => {
      const own = urisByCollection.get(collection) ?? []
      const did = dids[0]!
      const missing = `at://${did}/${collection}/3kaaaaaaaaaaa`
      const foreign = allUris.find((u) => !u.includes(`/${collection}/`))!
      await diff.same(rpc, { uris: own })
      await diff.same(rpc, { uris: [missing, ...own, foreign, own[0]!, missing] })
      await diff.same(rpc, { uris: allUris })
      await diff.same(rpc, { uris: [] })
      await diff.bothReject(rpc, { uris: [...own, 'not a uri'] })
    })
  }

  it('GetPostRecords: meta for posts and non-posts, op threads on request', async () => {
    const extra = [`at://${MISSING_DID}/app.bsky.feed.post/3kaaaaaaaaaaa`, allUris[0]!]
    await diff.same('getPostRecords', { uris: [...allPosts, ...extra] })
    await diff.same('getPostRecords', {
      uris: [...allPosts, ...extra],
      includeOpThreadMetadata: true,
    })
    const res = (await diff.same('getPostRecords', {
      uris: [opRoots.alice, opRoots.dan, opRoots.synthetic],
      includeOpThreadMetadata: true,
    })) as { opThreads?: { rootUri: string; uris: string[] }[] }
    // The seeds exercise the chain walk: a kept deleted reply, a reclaimed slot, a cycle.
    const roots = (res.opThreads ?? []).map((t) => t.rootUri).sort()
    expect(roots).toEqual([opRoots.alice, opRoots.dan].sort())
    for (const uri of allPosts) {
      await diff.same('getPostRecords', { uris: [uri], includeOpThreadMetadata: true })
    }
    await diff.same('getPostRecords', { uris: [], includeOpThreadMetadata: true })
  })

  it('GetActors: known, missing and duplicate dids, with and without age assurance', async () => {
    const all = [...dids, MISSING_DID, dids[0]!]
    await diff.same('getActors', { dids: all })
    await diff.same('getActors', { dids: all, returnAgeAssuranceForDids: all })
    await diff.same('getActors', { dids: all, returnAgeAssuranceForDids: [dids[2]!] })
    for (const did of dids) await diff.same('getActors', { dids: [did] })
    await diff.same('getActors', { dids: [] })
  })

  it('GetDidsByHandles: exact handles only', async () => {
    await diff.same('getDidsByHandles', {
      handles: ['alice.test', 'bob.test', 'nobody.test', 'ALICE.TEST', 'carol.test', 'alice.test'],
    })
    await diff.same('getDidsByHandles', { handles: [] })
  })

  it('GetLabels: by subject and issuer, expired dropped, duplicates repeated', async () => {
    const labelled = await ours.db.db.selectFrom('label').select(['uri', 'src']).execute()
    const subjects = [...new Set(labelled.map((l) => l.uri))]
    const issuers = [...new Set(labelled.map((l) => l.src))]
    await diff.same('getLabels', { subjects, issuers })
    await diff.same('getLabels', { subjects: [...subjects, subjects[0]!, 'at://x'], issuers })
    await diff.same('getLabels', { subjects, issuers: [EXAMPLE_LABELER] })
    await diff.same('getLabels', { subjects, issuers: [] })
    await diff.same('getLabels', { subjects: [], issuers })
  })

  it('GetLatestRev', async () => {
    for (const did of [...dids, MISSING_DID]) await diff.same('getLatestRev', { actorDid: did })
  })

  it('GetInteractionCounts, GetCountsForUsers', async () => {
    const refs = [...allPosts, 'at://missing/app.bsky.feed.post/x', allPosts[0]!].map((uri) => ({
      uri,
    }))
    await diff.same('getInteractionCounts', { refs })
    await diff.same('getInteractionCounts', { refs: [] })
    await diff.same('getCountsForUsers', { dids: [...dids, MISSING_DID, dids[0]!] })
    await diff.same('getCountsForUsers', { dids: [] })
  })

  it('GetStarterPackCounts, GetListCounts', async () => {
    const packs = urisByCollection.get('app.bsky.graph.starterpack') ?? []
    const lists = urisByCollection.get('app.bsky.graph.list') ?? []
    const refs = (uris: string[]) => [...uris, 'at://missing/x/y', uris[0]!].map((uri) => ({ uri }))
    await diff.same('getStarterPackCounts', { refs: refs(packs) })
    await diff.same('getStarterPackCounts', { refs: [] })
    await diff.same('getListCounts', { refs: refs(lists) })
    await diff.same('getListCounts', { refs: [] })
  })

  it('GetAllLabelers answers (the stock does not implement it)', async () => {
    const client = net.clientFor(ours.server.url)
    const res = await client.getAllLabelers({})
    // Every labeler, newest first (order checked against the rows, not the seeding order).
    expect([...res.uris].sort()).toEqual(
      [...urisByCollection.get('app.bsky.labeler.service')!].sort(),
    )
    const rows = await ours.db.db.selectFrom('labeler').select(['uri', 'sortAt']).execute()
    const sortAt = new Map(rows.map((r) => [r.uri, r.sortAt]))
    const times = res.uris.map((u) => sortAt.get(u)!)
    expect(times).toEqual([...times].sort().reverse())
    expect(res.records.map((r) => r.cid.length > 0)).toEqual(res.uris.map(() => true))
    await expect(net.stock.getAllLabelers({})).rejects.toThrow()
  })
})

/** Records of every collection the rpcs serve, plus OP threads, through the PDS. */
async function seedExtras(
  sc: SeedClient<TestNetwork>,
): Promise<{ alice: string; dan: string; synthetic: string }> {
  const { alice, bob, carol, dan } = sc.dids as Record<string, Did>
  const put = async (did: Did, collection: string, rkey: string, record: object) => {
    await sc.agent.com.atproto.repo.putRecord(
      { repo: did, collection, rkey, record: { $type: collection, ...record }, validate: false },
      { headers: sc.getHeaders(did) },
    )
  }
  const now = () => new Date().toISOString()
  await sc.block(dan!, carol!)
  const modList = await sc.createList(bob!, 'mods', 'mod')
  await sc.addToList(bob!, alice!, modList)
  await put(alice!, 'app.bsky.graph.listblock', '3kblockbob222', {
    subject: modList.uriStr,
    createdAt: now(),
  })
  const pack = await sc.createStarterPack(alice!, 'starter', [bob!, carol!])
  await sc.createFeedGen(alice!, 'did:web:feed.test', 'a feed')
  await sc.verify(alice!, bob!, 'bob.test', 'bobby')
  await sc.verify(carol!, bob!, 'bob.test', 'bobby')
  await sc.verify(alice!, dan!, 'dan.test', 'dan')
  const gated = sc.posts[alice!]![0]!.ref
  await put(alice!, 'app.bsky.feed.threadgate', gated.uri.rkey, {
    post: gated.uriStr,
    allow: [{ $type: 'app.bsky.feed.threadgate#followingRule' }],
    createdAt: now(),
  })
  await put(alice!, 'app.bsky.feed.postgate', gated.uri.rkey, {
    post: gated.uriStr,
    embeddingRules: [{ $type: 'app.bsky.feed.postgate#disableRule' }],
    createdAt: now(),
  })
  await put(carol!, 'app.bsky.labeler.service', 'self', {
    policies: { labelValues: ['spam'] },
    createdAt: now(),
  })
  await put(alice!, 'chat.bsky.actor.declaration', 'self', {
    allowIncoming: 'following',
    allowGroupInvites: 'none',
  })
  await put(bob!, 'chat.bsky.actor.declaration', 'self', { allowIncoming: 'all' })
  await put(alice!, 'app.bsky.notification.declaration', 'self', { allowSubscriptions: 'mutuals' })
  await put(bob!, 'app.bsky.notification.declaration', 'self', { allowSubscriptions: 'none' })
  await put(carol!, 'app.bsky.notification.declaration', 'self', {
    allowSubscriptions: 'everyone',
  })
  await put(alice!, 'com.germnetwork.declaration', 'self', {
    version: '1.0.0',
    currentKey: { $bytes: 'AQID' },
  })
  await put(bob!, 'app.bsky.actor.status', 'self', {
    status: 'app.bsky.actor.status#live',
    durationMinutes: 30,
    createdAt: now(),
  })
  // A profile that names the starter pack it joined through.
  const eve = await createUser(sc, 'eve')
  await setProfile(sc, eve, 'Eve', 'joined via pack', { joinedViaStarterPack: pack.raw })

  // Alice's thread: a chain of her own replies, one deleted mid-chain (kept: a reply survives
  // below it), plus an OP reply under someone else's reply (not on the chain).
  const root = (await sc.post(alice!, 'a thread')).ref
  const a1 = await sc.reply(alice!, root, root, '1/')
  const a2 = await sc.reply(alice!, root, a1.ref, '2/')
  await sc.reply(alice!, root, a2.ref, '3/')
  const b1 = await sc.reply(bob!, root, root, 'nice')
  await sc.reply(alice!, root, b1.ref, 'thanks')
  await sc.network.processAll()
  await sc.deletePost(alice!, a2.ref.uri)
  // Dan's thread: his only reply is deleted, then a newer one takes the slot.
  const danRoot = (await sc.post(dan!, 'dan thread')).ref
  const d1 = await sc.reply(dan!, danRoot, danRoot, 'first try')
  await sc.network.processAll()
  await sc.deletePost(dan!, d1.ref.uri)
  await sc.network.processAll()
  await new Promise((r) => setTimeout(r, 5))
  await sc.reply(dan!, danRoot, danRoot, 'second try')
  const synthetic = (await sc.post(carol!, 'rows written by hand')).ref
  return { alice: root.uriStr, dan: danRoot.uriStr, synthetic: synthetic.uriStr }
}

/** State the PDS cannot produce: moderation, private data, labels, odd rows. */
async function seedDirect(
  ours: OurServer,
  sc: SeedClient<TestNetwork>,
  roots: { synthetic: string },
): Promise<void> {
  const db = ours.db.db
  const { alice, bob, carol, dan } = sc.dids as Record<string, Did>
  const post = sc.posts[bob!]![0]!.ref.uriStr
  await db.updateTable('record').set({ takedownRef: 'mod-1' }).where('uri', '=', post).execute()
  await db
    .updateTable('record')
    .set({ tags: JSON.stringify(['hot', 'spam']) })
    .where('uri', 'in', [
      sc.posts[alice!]![0]!.ref.uriStr,
      `at://${alice}/app.bsky.actor.profile/self`,
    ])
    .execute()
  await db.updateTable('actor').set({ trustedVerifier: true }).where('did', '=', alice!).execute()
  await db.updateTable('actor').set({ takedownRef: 'mod-2' }).where('did', '=', dan!).execute()
  await db
    .updateTable('actor')
    .set({ upstreamStatus: 'deactivated' })
    .where('did', '=', bob!)
    .execute()
  await db
    .updateTable('actor')
    .set({
      ageAssuranceStatus: 'assured',
      ageAssuranceLastInitiatedAt: new Date(Date.UTC(2025, 0, 1)).toISOString(),
    })
    .where('did', '=', carol!)
    .execute()
  await db
    .updateTable('actor')
    .set({ ageAssuranceStatus: 'blocked', ageAssuranceAccess: 'unknown' })
    .where('did', '=', bob!)
    .execute()
  await db
    .insertInto('actor_state')
    .values({ did: alice!, lastSeenNotifs: new Date().toISOString(), priorityNotifs: true })
    .onConflict((oc) => oc.column('did').doUpdateSet({ priorityNotifs: true }))
    .execute()
  await db
    .insertInto('draft')
    .values({
      creator: alice!,
      key: '3kdraft222222',
      createdAt: new Date().toISOString(),
      updatedAt: new Date().toISOString(),
      payload: '{}',
    })
    .execute()
  type LabelFields = { src: string; uri: string; cid: string; val: string; neg: boolean }
  const label = (over: Partial<LabelFields & { exp: string | null }>) => ({
    src: EXAMPLE_LABELER,
    uri: sc.posts[alice!]![0]!.ref.uriStr,
    cid: '',
    val: 'x',
    neg: false,
    cts: new Date().toISOString(),
    exp: null,
    ...over,
  })
  await db
    .insertInto('label')
    .values([
      label({ val: 'test-label', uri: sc.posts[alice!]![2]!.ref.uriStr }),
      label({ val: 'test-label', uri: sc.replies[bob!]![0]!.ref.uriStr }),
      label({ val: 'test-label-2', uri: sc.replies[bob!]![0]!.ref.uriStr }),
      label({ val: 'negated', neg: true }),
      label({ val: 'expired', exp: new Date(Date.now() - 60_000).toISOString() }),
      label({ val: 'expiring', exp: new Date(Date.now() + 3_600_000).toISOString() }),
      label({ val: 'other-src', src: 'did:example:other' }),
      label({ val: 'with-cid', cid: sc.posts[alice!]![0]!.ref.cidStr }),
      { ...label({ val: 'on-actor' }), uri: alice! },
    ])
    .execute()
  // Hand-written OP rows: a cycle voids the synthetic thread.
  await db
    .insertInto('op_thread_reply')
    .values([
      {
        rootUri: roots.synthetic,
        parentUri: roots.synthetic,
        uri: `${roots.synthetic}-a`,
        deletedAt: null,
      },
      {
        rootUri: roots.synthetic,
        parentUri: `${roots.synthetic}-a`,
        uri: roots.synthetic,
        deletedAt: null,
      },
    ])
    .execute()
}

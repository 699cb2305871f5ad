// Record updates and duplicates against the stock indexer: profile, list, starter pack, feed
// generator, follow, repost, block and verification updates (delete + insert, with the stock's
// notification rules for each), and duplicate follows, reposts, blocks, list items, list blocks
// and verifications: tracked in duplicate_record and promoted when the original goes.
import { describe, expect, it } from 'vitest'
import { compareIndexers } from '../harness/compare-indexers.ts'
import { createUser, setProfile } from '../harness/seed.ts'
import type { StockNetwork } from '../harness/stock-network.ts'

type Ref = { uri: string; cid: string }
type Rec = Record<string, unknown>

/** Record writes through the PDS, each waited for: the stock indexes repos concurrently. */
function writer(net: StockNetwork) {
  const { sc, network } = net
  const opts = (did: string) => ({
    headers: sc.getHeaders(did as never),
    encoding: 'application/json' as const,
  })
  const split = (uri: string) => uri.replace('at://', '').split('/') as [string, string, string]
  const stamp = (collection: string, record: Rec) => ({
    $type: collection,
    createdAt: new Date().toISOString(),
    ...record,
  })
  return {
    /** `validate: false` also skips the PDS's replacing of an earlier follow/repost/block. */
    async create(did: string, collection: string, record: Rec, validate?: false): Promise<Ref> {
      const res = await sc.agent.com.atproto.repo.createRecord(
        { repo: did, collection, validate, record: stamp(collection, record) },
        opts(did),
      )
      await network.processAll()
      return { uri: res.data.uri, cid: res.data.cid }
    },
    async put(uri: string, record: Rec, raw = false): Promise<Ref> {
      const [did, collection, rkey] = split(uri)
      const res = await sc.agent.com.atproto.repo.putRecord(
        {
          repo: did,
          collection,
          rkey,
          record: raw ? { $type: collection, ...record } : stamp(collection, record),
        },
        opts(did),
      )
      await network.processAll()
      return { uri: res.data.uri, cid: res.data.cid }
    },
    async remove(uri: string) {
      const [did, collection, rkey] = split(uri)
      await sc.agent.com.atproto.repo.deleteRecord({ repo: did, collection, rkey }, opts(did))
      await network.processAll()
    },
  }
}

async function scenario(net: StockNetwork) {
  const w = writer(net)
  const { sc } = net
  const [alice, bob, carol, dan] = [
    await createUser(sc, 'alice'),
    await createUser(sc, 'bob'),
    await createUser(sc, 'carol'),
    await createUser(sc, 'dan'),
  ]
  const post = await w.create(alice, 'app.bsky.feed.post', { text: 'hello' })
  const other = await w.create(alice, 'app.bsky.feed.post', { text: 'hello again' })

  // Profiles: no createdAt (the stock stamps the wall clock), updates, a pinned post, deletion.
  await setProfile(sc, alice, 'Alice', 'first bio')
  const profile = `at://${alice}/app.bsky.actor.profile/self`
  await w.put(
    profile,
    { displayName: 'Alice 2', description: 'second bio', pinnedPost: post },
    true,
  )
  await w.put(profile, { displayName: 'Alice 3', createdAt: '2024-01-01T00:00:00+00:00' }, true)
  await setProfile(sc, bob, 'Bob', 'to be removed')
  await w.remove(`at://${bob}/app.bsky.actor.profile/self`)

  // Starter pack join: a new profile notifies the pack's creator; adding it by update does not.
  const list = await w.create(alice, 'app.bsky.graph.list', {
    name: 'pack list',
    purpose: 'app.bsky.graph.defs#referencelist',
  })
  const pack = await w.create(alice, 'app.bsky.graph.starterpack', {
    name: 'my pack',
    list: list.uri,
  })
  await w.put(`at://${carol}/app.bsky.actor.profile/self`, {
    displayName: 'Carol',
    joinedViaStarterPack: pack,
  })
  await w.put(`at://${dan}/app.bsky.actor.profile/self`, { displayName: 'Dan' })
  await w.put(`at://${dan}/app.bsky.actor.profile/self`, {
    displayName: 'Dan',
    joinedViaStarterPack: pack,
  })
  await w.put(`at://${alice}/app.bsky.actor.profile/self`, {
    displayName: 'Alice',
    joinedViaStarterPack: pack,
  })
  await w.put(pack.uri, { name: 'renamed pack', list: list.uri, description: 'now described' })

  // List, feed generator updates.
  await w.put(list.uri, {
    name: 'renamed list',
    purpose: 'app.bsky.graph.defs#curatelist',
    description: 'see @bob',
    descriptionFacets: [
      {
        index: { byteStart: 4, byteEnd: 8 },
        features: [{ $type: 'app.bsky.richtext.facet#mention', did: bob }],
      },
    ],
  })
  const feed = await w.create(bob, 'app.bsky.feed.generator', {
    did: 'did:web:feed.example',
    displayName: 'feed',
  })
  await w.put(feed.uri, {
    did: 'did:web:other.example',
    displayName: 'feed 2',
    description: 'better',
  })

  // Duplicate follows: the second is tracked, promoted when the first goes; counts stay exact.
  const f1 = await w.create(bob, 'app.bsky.graph.follow', { subject: alice })
  const f2 = await w.create(bob, 'app.bsky.graph.follow', { subject: alice }, false)
  await w.create(bob, 'app.bsky.graph.follow', { subject: alice }, false)
  await w.remove(f1.uri)
  await w.put(f2.uri, { subject: carol })
  await w.create(carol, 'app.bsky.graph.follow', { subject: alice })
  const f4 = await w.create(dan, 'app.bsky.graph.follow', { subject: alice })
  await w.remove(f4.uri)

  // Duplicate reposts (one via a repost) and their promotion; a repost update.
  const rp1 = await w.create(carol, 'app.bsky.feed.repost', { subject: post })
  await w.create(carol, 'app.bsky.feed.repost', { subject: post }, false)
  await w.create(dan, 'app.bsky.feed.repost', { subject: post, via: rp1 })
  // Without `validate: false` the PDS deletes the earlier repost in the same commit.
  await w.create(dan, 'app.bsky.feed.repost', { subject: post })
  await w.remove(rp1.uri)
  // A duplicate repost that stays one still gets a feed item in the stock; deleting one drops it.
  await w.create(dan, 'app.bsky.feed.repost', { subject: other })
  await w.create(dan, 'app.bsky.feed.repost', { subject: other }, false)
  const rpDup = await w.create(dan, 'app.bsky.feed.repost', { subject: other }, false)
  await w.remove(rpDup.uri)
  const rp3 = await w.create(bob, 'app.bsky.feed.repost', { subject: post })
  await w.put(rp3.uri, { subject: other })
  await w.create(alice, 'app.bsky.feed.repost', { subject: other, via: rp3 })

  // Duplicate blocks, list items, list blocks.
  const b1 = await w.create(dan, 'app.bsky.graph.block', { subject: bob })
  await w.create(dan, 'app.bsky.graph.block', { subject: bob }, false)
  await w.remove(b1.uri)
  const modList = await w.create(dan, 'app.bsky.graph.list', {
    name: 'mods',
    purpose: 'app.bsky.graph.defs#modlist',
  })
  const li1 = await w.create(dan, 'app.bsky.graph.listitem', { subject: bob, list: modList.uri })
  await w.create(dan, 'app.bsky.graph.listitem', { subject: bob, list: modList.uri })
  await w.remove(li1.uri)
  const lb1 = await w.create(carol, 'app.bsky.graph.listblock', { subject: modList.uri })
  await w.create(carol, 'app.bsky.graph.listblock', { subject: modList.uri })
  await w.remove(lb1.uri)

  // Verifications: create, update (unverified, no new verified), duplicate and promotion, delete.
  const v1 = await w.create(alice, 'app.bsky.graph.verification', {
    subject: bob,
    handle: 'bob.test',
    displayName: 'Bob',
  })
  await w.put(v1.uri, { subject: bob, handle: 'bob.test', displayName: 'Bobby' })
  await w.create(alice, 'app.bsky.graph.verification', {
    subject: bob,
    handle: 'bob.test',
    displayName: 'B',
  })
  await w.remove(v1.uri)
  const v3 = await w.create(alice, 'app.bsky.graph.verification', {
    subject: carol,
    handle: 'carol.test',
    displayName: 'Carol',
  })
  await w.remove(v3.uri)
  await w.create(bob, 'app.bsky.graph.verification', {
    subject: bob,
    handle: 'bob.test',
    displayName: 'me',
  })
}

describe('plugins: updates and duplicates', () => {
  const run = compareIndexers(scenario)

  it('exercised the cases', async () => {
    const db = run().ours.db.db
    const dups = await db.selectFrom('duplicate_record').select('uri').execute()
    // A promoted duplicate keeps its row (as in the stock): follow (x2), repost (x2), block,
    // list item, list block, verification; the follow updated to another subject lost its row.
    const collections = dups.map((d) => d.uri.split('/')[3]).sort()
    expect(collections).toEqual(
      [
        'app.bsky.feed.repost',
        'app.bsky.feed.repost',
        'app.bsky.graph.block',
        'app.bsky.graph.follow',
        'app.bsky.graph.listblock',
        'app.bsky.graph.listitem',
        'app.bsky.graph.verification',
      ].sort(),
    )
    const reasons = await db.selectFrom('notification').select('reason').execute()
    const count = (r: string) => reasons.filter((n) => n.reason === r).length
    expect(count('starterpack-joined')).toBe(1)
    expect(count('unverified')).toBe(3)
  })
})

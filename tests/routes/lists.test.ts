// Lists, mutes, mute lists, thread mutes, blocks and block lists, differentially, plus the mute
// writes (ingestion) applied through either dataplane and read back through both.
import { Code } from '@connectrpc/connect'
import type { RecordRef } from '@atproto/dev-env'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { act } from '../harness/appview-diff.ts'
import { startOurServer, type OurServer } from '../harness/ours.ts'
import { createUser, seedBasic } from '../harness/seed.ts'
import {
  startStockNetwork,
  type DataplaneClient,
  type StockNetwork,
} from '../harness/stock-network.ts'
import { didsOf, differ, WALK_LIMITS, type Did, type Differ } from './diff.ts'

const MISSING_DID = 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa'
const MISSING_LIST = `at://${MISSING_DID}/app.bsky.graph.list/3kaaaaaaaaaaa`
const EXTRA_USERS = ['user0', 'user1', 'user2', 'user3', 'user4', 'user5', 'user6', 'user7']

describe('list, mute and block routes', () => {
  let net: StockNetwork
  let ours: OurServer
  let client: DataplaneClient
  let d: Differ
  let dids: Record<string, string>
  let lists: Record<string, string>
  let roots: string[]

  beforeAll(async () => {
    net = await startStockNetwork()
    dids = await seedBasic(net.sc)
    for (const name of ['eve', 'fred', ...EXTRA_USERS]) dids[name] = await createUser(net.sc, name)
    ;({ lists, roots } = await seedGraph(net, dids))
    await net.network.processAll()
    ours = await startOurServer({
      schema: net.schema,
      plcUrl: net.network.plc.url,
      pdsUrl: net.network.pds.url,
    })
    client = net.clientFor(ours.server.url)
    d = differ(client, net.stock)
  })
  afterAll(async () => {
    await ours?.close()
    await net?.close()
  })

  const actors = () => [...Object.values(dids), MISSING_DID]
  const listUris = () => [...Object.values(lists), MISSING_LIST]
  const pairs = () => actors().flatMap((a) => actors().map((b) => [a, b] as const))

  it('GetActorLists: every actor, walked', async () => {
    for (const actorDid of actors()) {
      for (const limit of WALK_LIMITS) {
        await d.walk(`lists ${actorDid} ${limit}`, (c, cursor) =>
          c.getActorLists({ actorDid, limit, cursor }),
        )
      }
    }
  })

  it('GetListMembers: every list, as owner, as someone else and anonymously', async () => {
    for (const listUri of listUris()) {
      for (const viewerDid of ['', dids.alice!, dids.bob!]) {
        for (const limit of WALK_LIMITS) {
          await d.walk(`members ${listUri} ${viewerDid} ${limit}`, (c, cursor) =>
            c.getListMembers({ listUri, viewerDid, limit, cursor }),
          )
        }
      }
    }
    const asOwner = await d.same('owner', (c) =>
      c.getListMembers({ listUri: lists.reference!, viewerDid: dids.alice!, limit: 50 }),
    )
    expect(asOwner.listitems.filter((i) => i.subjectOptedOut).map((i) => i.did)).toEqual([
      dids.carol,
    ])
    const asOther = await d.same('other', (c) =>
      c.getListMembers({ listUri: lists.reference!, viewerDid: dids.bob!, limit: 50 }),
    )
    expect(asOther.listitems.length).toBe(asOwner.listitems.length - 1)
  })

  it('GetListMembership, GetListCount, GetReferencelistoptoutsByActorAndSubjects', async () => {
    const uris = listUris()
    for (const actorDid of actors()) {
      await d.same(`membership ${actorDid}`, (c) =>
        c.getListMembership({ actorDid, listUris: [...uris, uris[0]!] }),
      )
      await d.same(`optouts ${actorDid}`, (c) =>
        c.getReferencelistoptoutsByActorAndSubjects({ actorDid, subjectUris: uris }),
      )
    }
    for (const listUri of uris) await d.same(`count ${listUri}`, (c) => c.getListCount({ listUri }))
    await d.same('membership none', (c) =>
      c.getListMembership({ actorDid: dids.bob!, listUris: [] }),
    )
    // Only the reference list's opt-out counts; bob's opt-out of a curate list does not.
    const carol = await d.same('carol', (c) =>
      c.getReferencelistoptoutsByActorAndSubjects({ actorDid: dids.carol!, subjectUris: uris }),
    )
    expect(carol.uris.filter(Boolean)).toHaveLength(1)
    const bob = await d.same('bob', (c) =>
      c.getReferencelistoptoutsByActorAndSubjects({ actorDid: dids.bob!, subjectUris: uris }),
    )
    expect(bob.uris.filter(Boolean)).toHaveLength(0)
  })

  it('mutes: GetActorMutesActor and GetActorMutesActorViaList for every pair, GetMutes walked', async () => {
    for (const [actorDid, targetDid] of pairs()) {
      await d.same(`mutes ${actorDid} ${targetDid}`, (c) =>
        c.getActorMutesActor({ actorDid, targetDid }),
      )
      await d.same(`via list ${actorDid} ${targetDid}`, (c) =>
        c.getActorMutesActorViaList({ actorDid, targetDid }),
      )
    }
    for (const actorDid of actors()) {
      for (const limit of WALK_LIMITS) {
        await d.walk(`getMutes ${actorDid} ${limit}`, (c, cursor) =>
          c.getMutes({ actorDid, limit, cursor }),
        )
      }
    }
    const partial = await d.same('reposts only', (c) =>
      c.getActorMutesActor({ actorDid: dids.dan!, targetDid: dids.alice! }),
    )
    expect(partial.muted).toBe(false)
    expect(partial.mutedOnlyReposts).toBe(true)
  })

  it('mute lists: GetMutelistSubscription for every actor and list, subscriptions walked', async () => {
    for (const actorDid of actors()) {
      for (const listUri of listUris()) {
        await d.same(`sub ${actorDid} ${listUri}`, (c) =>
          c.getMutelistSubscription({ actorDid, listUri }),
        )
      }
      for (const limit of WALK_LIMITS) {
        await d.walk(`subs ${actorDid} ${limit}`, (c, cursor) =>
          c.getMutelistSubscriptions({ actorDid, limit, cursor }),
        )
      }
    }
  })

  it('GetThreadMutesOnSubjects', async () => {
    const threadRoots = [...roots, `at://${MISSING_DID}/app.bsky.feed.post/x`, roots[0]!]
    for (const actorDid of actors()) {
      await d.same(`thread mutes ${actorDid}`, (c) =>
        c.getThreadMutesOnSubjects({ actorDid, threadRoots }),
      )
    }
    const alice = await d.same('alice', (c) =>
      c.getThreadMutesOnSubjects({ actorDid: dids.alice!, threadRoots }),
    )
    expect(alice.muted.filter(Boolean).length).toBeGreaterThan(0)
    await d.same('none', (c) =>
      c.getThreadMutesOnSubjects({ actorDid: dids.alice!, threadRoots: [] }),
    )
  })

  it('blocks: GetBidirectionalBlock and GetBidirectionalBlockViaList for every pair, GetBlocks walked', async () => {
    for (const [actorDid, targetDid] of pairs()) {
      await d.same(`block ${actorDid} ${targetDid}`, (c) =>
        c.getBidirectionalBlock({ actorDid, targetDid }),
      )
      await d.same(`block via list ${actorDid} ${targetDid}`, (c) =>
        c.getBidirectionalBlockViaList({ actorDid, targetDid }),
      )
    }
    for (const actorDid of actors()) {
      for (const limit of WALK_LIMITS) {
        await d.walk(`getBlocks ${actorDid} ${limit}`, (c, cursor) =>
          c.getBlocks({ actorDid, limit, cursor }),
        )
      }
    }
  })

  it('block lists: GetBlocklistSubscription for every actor and list, subscriptions walked', async () => {
    for (const actorDid of actors()) {
      for (const listUri of listUris()) {
        await d.same(`sub ${actorDid} ${listUri}`, (c) =>
          c.getBlocklistSubscription({ actorDid, listUri }),
        )
      }
      for (const limit of WALK_LIMITS) {
        await d.walk(`subs ${actorDid} ${limit}`, (c, cursor) =>
          c.getBlocklistSubscriptions({ actorDid, limit, cursor }),
        )
      }
    }
  })

  it('mute writes through ours and through the stock leave the same state', async () => {
    const [a, b, c] = [dids.user0!, dids.user1!, dids.user2!]
    // ours: a mutes c (reposts only) then fully; stock: b the same.
    for (const [writer, actorDid] of [
      [client, a],
      [net.stock, b],
    ] as const) {
      await writer.createActorMute({ actorDid, subjectDid: c, onlyReposts: true })
      await writer.createActorMute({ actorDid, subjectDid: dids.user3!, onlyQuoteposts: true })
      await writer.createActorMute({ actorDid, subjectDid: c })
      await writer.createActorMute({ actorDid, subjectDid: dids.user4! })
      await writer.deleteActorMute({ actorDid, subjectDid: dids.user4! })
    }
    const mutesOf = async (actorDid: string) =>
      (await d.same(`getMutes ${actorDid}`, (cl) => cl.getMutes({ actorDid, limit: 50 }))).toJson()
    expect(await mutesOf(a)).toEqual(await mutesOf(b))
    const full = await d.same('a c', (cl) => cl.getActorMutesActor({ actorDid: a, targetDid: c }))
    expect(full.muted).toBe(true)
    for (const [writer, actorDid] of [
      [client, a],
      [net.stock, b],
    ] as const) {
      await writer.clearActorMutes({ actorDid })
    }
    expect(await mutesOf(a)).toEqual({})
    expect(await mutesOf(b)).toEqual({})
  })

  it('mute list writes through ours and through the stock leave the same state', async () => {
    const [a, b] = [dids.user5!, dids.user6!]
    for (const [writer, actorDid] of [
      [client, a],
      [net.stock, b],
    ] as const) {
      for (const subjectUri of Object.values(lists)) {
        await writer.createActorMutelistSubscription({ actorDid, subjectUri })
      }
      await writer.createActorMutelistSubscription({ actorDid, subjectUri: lists.mod! })
      await writer.deleteActorMutelistSubscription({ actorDid, subjectUri: lists.curate! })
    }
    const subsOf = async (actorDid: string) =>
      (
        await d.same(`subs ${actorDid}`, (cl) =>
          cl.getMutelistSubscriptions({ actorDid, limit: 50 }),
        )
      ).listUris
    expect(await subsOf(a)).toEqual(await subsOf(b))
    expect(await subsOf(a)).toHaveLength(Object.keys(lists).length - 1)
    const via = await d.same('via', (cl) =>
      cl.getActorMutesActorViaList({ actorDid: a, targetDid: dids.eve! }),
    )
    expect(via.listUri).not.toBe('')
    for (const [writer, actorDid] of [
      [client, a],
      [net.stock, b],
    ] as const) {
      await writer.clearActorMutelistSubscriptions({ actorDid })
    }
    expect(await subsOf(a)).toEqual([])
    expect(await subsOf(b)).toEqual([])
  })

  it('bad writes and cursors are InvalidArgument', async () => {
    const actorDid = dids.user7!
    await d.bothReject(
      'self mute',
      (c) => c.createActorMute({ actorDid, subjectDid: actorDid }),
      Code.InvalidArgument,
    )
    await d.bothReject(
      'self unmute',
      (c) => c.deleteActorMute({ actorDid, subjectDid: actorDid }),
      Code.InvalidArgument,
    )
    const post = `at://${dids.alice}/app.bsky.feed.post/3kaaaaaaaaaaa`
    await d.bothReject(
      'mute a post',
      (c) => c.createActorMutelistSubscription({ actorDid, subjectUri: post }),
      Code.InvalidArgument,
    )
    await d.bothReject(
      'unmute a post',
      (c) => c.deleteActorMutelistSubscription({ actorDid, subjectUri: post }),
      Code.InvalidArgument,
    )
    for (const cursor of ['abc', '1__2__3', 'x__y']) {
      await d.bothReject(
        `lists ${cursor}`,
        (c) => c.getActorLists({ actorDid, cursor }),
        Code.InvalidArgument,
      )
      await d.bothReject(
        `members ${cursor}`,
        (c) => c.getListMembers({ listUri: lists.curate!, cursor }),
        Code.InvalidArgument,
      )
      await d.bothReject(
        `mutes ${cursor}`,
        (c) => c.getMutes({ actorDid, cursor }),
        Code.InvalidArgument,
      )
      await d.bothReject(
        `blocks ${cursor}`,
        (c) => c.getBlocks({ actorDid, cursor }),
        Code.InvalidArgument,
      )
      await d.bothReject(
        `mutelists ${cursor}`,
        (c) => c.getMutelistSubscriptions({ actorDid, cursor }),
        Code.InvalidArgument,
      )
      await d.bothReject(
        `blocklists ${cursor}`,
        (c) => c.getBlocklistSubscriptions({ actorDid, cursor }),
        Code.InvalidArgument,
      )
    }
  })
})

/** Lists of every purpose, an opt-out, mutes (actor, list, thread), blocks (actor, list). */
async function seedGraph(
  net: StockNetwork,
  dids: Record<string, string>,
): Promise<{ lists: Record<string, string>; roots: string[] }> {
  const sc = net.sc
  const u = didsOf(dids, 'alice', 'bob', 'carol', 'dan', 'eve', 'fred')
  const extra = Object.values(didsOf(dids, ...EXTRA_USERS))
  const appview = (did: Did, nsid: string, body: unknown) => act(net, did, nsid, body)
  const createRecord = (did: Did, collection: string, record: Record<string, unknown>) =>
    sc.agent.com.atproto.repo.createRecord(
      {
        repo: did,
        collection,
        record: { $type: collection, createdAt: new Date().toISOString(), ...record },
      },
      { headers: sc.getHeaders(did) },
    )

  const addAll = async (owner: Did, list: RecordRef, members: Did[]) => {
    for (const m of members) await sc.addToList(owner, m, list)
  }
  const curate = await sc.createList(u.alice, 'curate', 'curate')
  await addAll(u.alice, curate, [u.bob, u.carol, u.dan, ...extra])
  const mod = await sc.createList(u.alice, 'mod', 'mod')
  await addAll(u.alice, mod, [u.eve, u.fred])
  const reference = await sc.createList(u.alice, 'reference', 'reference')
  await addAll(u.alice, reference, [u.bob, u.carol, u.eve])
  const bobMod = await sc.createList(u.bob, 'bob mod', 'mod')
  await addAll(u.bob, bobMod, [u.alice, u.dan])
  for (let i = 0; i < 6; i++) await sc.createList(u.carol, `carol ${i}`, 'curate')
  await createRecord(u.carol, 'app.bsky.graph.referencelistoptout', { subject: reference.uriStr })
  await createRecord(u.bob, 'app.bsky.graph.referencelistoptout', { subject: curate.uriStr })

  // Mutes through the AppView (bsync): alice mutes many, dan mutes alice's reposts only.
  for (const target of [u.bob, u.carol, u.eve, ...extra.slice(0, 5)]) {
    await appview(u.alice, 'app.bsky.graph.muteActor', { actor: target })
  }
  await appview(u.dan, 'app.bsky.graph.muteActor', { actor: u.alice, onlyReposts: true })
  await appview(u.eve, 'app.bsky.graph.muteActor', { actor: u.fred, onlyQuoteposts: true })
  for (const list of [mod, bobMod, curate]) {
    await appview(u.dan, 'app.bsky.graph.muteActorList', { list: list.uriStr })
  }
  await appview(u.carol, 'app.bsky.graph.muteActorList', { list: bobMod.uriStr })
  const roots = [sc.posts[u.alice]![0]!.ref.uriStr, sc.posts[u.bob]![0]!.ref.uriStr]
  await appview(u.alice, 'app.bsky.graph.muteThread', { root: roots[0] })

  // Blocks both ways between alice and eve, several by fred; block list subscriptions.
  await sc.block(u.alice, u.eve)
  await sc.block(u.eve, u.alice)
  for (const target of [u.alice, u.bob, ...extra]) await sc.block(u.fred, target)
  for (const list of [mod, bobMod, reference]) {
    await createRecord(u.carol, 'app.bsky.graph.listblock', { subject: list.uriStr })
  }
  await createRecord(u.dan, 'app.bsky.graph.listblock', { subject: mod.uriStr })

  return {
    lists: {
      curate: curate.uriStr,
      mod: mod.uriStr,
      reference: reference.uriStr,
      bobMod: bobMod.uriStr,
    },
    roots,
  }
}

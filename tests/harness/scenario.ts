// A user story played through the PDS, touching every record type the indexer handles. Both the
// indexer differential test and the AppView differential test replay it.
import type { SeedClient, TestNetwork } from '@atproto/dev-env'
import { createUser, seedBasic, setProfile } from './seed.ts'

export interface ScenarioResult {
  dids: Record<string, string>
  /** An account that was deleted at the end. */
  deleted: string
}

export async function playScenario(
  network: TestNetwork,
  sc: SeedClient<TestNetwork>,
): Promise<ScenarioResult> {
  const { alice, bob, carol, dan } = await seedBasic(sc)
  const alicePost = sc.posts[alice!]![0]!.ref
  const bobPost = sc.posts[bob!]![0]!.ref

  // Second like of the same subject: a duplicate, promoted when the first is deleted.
  const firstLike = await sc.like(dan!, alicePost)
  await sc.like(dan!, alicePost)
  await sc.agent.app.bsky.feed.like.delete(
    { repo: dan!, rkey: firstLike.rkey },
    sc.getHeaders(dan!),
  )
  // Reposts, quote, reply chain, deleted reply.
  const repost = await sc.repost(carol!, bobPost)
  await sc.post(dan!, 'quoting bob', undefined, undefined, bobPost)
  // The stock indexes repos concurrently: a reply in another repo than its parent must wait for
  // the parent to be indexed, or the stock's reply validation races (invalidReplyRoot).
  const r1 = await sc.reply(bob!, alicePost, alicePost, 'first reply')
  await network.processAll()
  const r2 = await sc.reply(carol!, alicePost, r1.ref, 'second reply')
  await network.processAll()
  await sc.reply(alice!, alicePost, r2.ref, 'op answers')
  const doomed = await sc.reply(dan!, alicePost, alicePost, 'to be deleted')
  await sc.deletePost(dan!, doomed.ref.uri)
  await sc.agent.app.bsky.feed.repost.delete(
    { repo: carol!, rkey: repost.uri.rkey },
    sc.getHeaders(carol!),
  )
  // Graph: unfollow, block, lists, starter pack, verification.
  await sc.unfollow(alice!, dan!).catch(() => undefined)
  await sc.follow(dan!, carol!)
  await sc.block(dan!, bob!)
  const list = await sc.createList(alice!, 'friends', 'curate')
  await sc.addToList(alice!, bob!, list)
  await sc.addToList(alice!, carol!, list)
  await sc.createList(bob!, 'mods', 'mod')
  await sc.createStarterPack(alice!, 'starter', [bob!, carol!])
  await sc.verify(alice!, bob!, 'bob.test', 'bob')
  // Profile update, handle change, deactivation.
  await sc.updateProfile(carol!, { displayName: 'Carol Updated', description: 'new bio' })
  await sc.updateHandle(dan!, 'dan-renamed.test')
  await sc.agent.com.atproto.server.deactivateAccount(
    {},
    { headers: sc.getHeaders(carol!), encoding: 'application/json' },
  )
  await network.processAll()
  // An account that interacted with everyone, then is deleted by the PDS admin.
  const frank = await createUser(sc, 'frank')
  await setProfile(sc, frank, 'Frank', 'leaving soon')
  const frankPost = await sc.post(frank, 'hello, briefly')
  await sc.follow(frank, alice!)
  await sc.follow(bob!, frank)
  await sc.like(frank, alicePost)
  await sc.like(alice!, frankPost.ref)
  await sc.repost(frank, bobPost)
  await sc.reply(frank, alicePost, alicePost, 'a reply that goes with its author')
  await network.processAll()
  await sc.agent.com.atproto.admin.deleteAccount(
    { did: frank },
    { headers: network.pds.adminAuthHeaders(), encoding: 'application/json' },
  )
  await network.processAll()
  return { dids: { alice: alice!, bob: bob!, carol: carol!, dan: dan! }, deleted: frank }
}

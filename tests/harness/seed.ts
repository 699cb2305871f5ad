// Seeding through the PDS. dev-env's own seeds read image assets its npm package does not ship,
// so users, profiles and image posts are made here with the fixtures in tests/fixtures/images.
import path from 'node:path'
import type { SeedClient, TestNetwork } from '@atproto/dev-env'

export const IMAGES = path.resolve(import.meta.dirname, '../fixtures/images')
export const NAMES = ['alice', 'bob', 'carol', 'dan'] as const

type Sc = SeedClient<TestNetwork>
export type Did = `did:${string}:${string}`

export async function createUser(sc: Sc, name: string): Promise<Did> {
  await sc.createAccount(name, {
    handle: `${name}.test`,
    email: `${name}@test.com`,
    password: `${name}-pass`,
  })
  return sc.dids[name] as Did
}

export async function setProfile(
  sc: Sc,
  did: string,
  displayName: string,
  description: string,
  extra: Record<string, unknown> = {},
): Promise<void> {
  const avatar = await sc.uploadFile(did as never, path.join(IMAGES, 'portrait.jpg'), 'image/jpeg')
  await sc.agent.app.bsky.actor.profile.create(
    { repo: did },
    { displayName, description, avatar: avatar.image, ...extra },
    sc.getHeaders(did as never),
  )
}

/** Four users with profiles, follows, posts (text, images, quotes, mentions), likes, replies, reposts. */
export async function seedBasic(sc: Sc): Promise<Record<(typeof NAMES)[number], Did>> {
  const d = {} as Record<(typeof NAMES)[number], Did>
  for (const n of NAMES) d[n] = await createUser(sc, n)
  const { alice, bob, carol, dan } = d
  await setProfile(sc, alice, 'Alice', 'its me!', {
    labels: { $type: 'com.atproto.label.defs#selfLabels', values: [{ val: 'self-label-a' }] },
  })
  await setProfile(sc, bob, 'Bob', 'hi im bob')
  await setProfile(sc, carol, 'Carol', '')
  // dan has no profile record at all
  const micro = () => ({ createdAt: new Date().toISOString().replace('Z', '000Z') })
  const tz = () => ({ createdAt: new Date().toISOString().replace('Z', '+00:00') })
  await sc.follow(alice, bob)
  await sc.follow(alice, carol)
  await sc.follow(alice, dan)
  await sc.follow(carol, alice)
  await sc.follow(bob, alice)
  await sc.follow(bob, carol, micro())
  await sc.follow(dan, bob, tz())
  await sc.post(alice, 'hey there', undefined, undefined, undefined, {
    labels: { $type: 'com.atproto.label.defs#selfLabels', values: [{ val: 'self-label' }] },
  })
  await sc.post(bob, 'bob back at it again!', undefined, undefined, undefined, {
    langs: ['en-US', 'i-klingon'],
  })
  const img1 = await sc.uploadFile(carol, path.join(IMAGES, 'landscape.jpg'), 'image/jpeg')
  const img2 = await sc.uploadFile(carol, path.join(IMAGES, 'portrait.jpg'), 'image/jpeg')
  await sc.post(carol, 'kicking it', undefined, [img1, img2], sc.posts[bob]![0]!.ref)
  await sc.post(dan, 'dan here!')
  await sc.post(
    dan,
    '@alice.bluesky.xyz is the best',
    [
      {
        index: { byteStart: 0, byteEnd: 18 },
        features: [{ $type: 'app.bsky.richtext.facet#mention', did: alice }],
      },
    ],
    undefined,
    sc.posts[carol]![0]!.ref,
  )
  await sc.post(alice, 'tomorrow', undefined, undefined, undefined, micro())
  await sc.post(bob, 'yoohoo label_me', undefined, undefined, undefined, tz())
  await sc.post(alice, 'again', undefined, undefined, sc.posts[dan]![1]!.ref)
  await sc.like(bob, sc.posts[alice]![1]!.ref)
  await sc.like(bob, sc.posts[alice]![2]!.ref)
  await sc.like(carol, sc.posts[alice]![1]!.ref)
  await sc.like(carol, sc.posts[alice]![2]!.ref)
  await sc.like(dan, sc.posts[alice]![1]!.ref)
  await sc.like(alice, sc.posts[carol]![0]!.ref, micro())
  await sc.like(bob, sc.posts[carol]![0]!.ref, tz())
  const replyImg = await sc.uploadFile(bob, path.join(IMAGES, 'landscape.jpg'), 'image/jpeg')
  await sc.network.processAll()
  const root = sc.posts[alice]![1]!.ref
  await sc.reply(bob, root, root, 'this is a reply', undefined, [replyImg])
  await sc.reply(carol, root, root, 'of course')
  await sc.network.processAll()
  const aliceReply = await sc.reply(alice, root, sc.replies[bob]![0]!.ref, 'thanks bob')
  await sc.repost(carol, sc.posts[dan]![1]!.ref)
  await sc.repost(dan, root)
  await sc.repost(dan, aliceReply.ref)
  return d
}

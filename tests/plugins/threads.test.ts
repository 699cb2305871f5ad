// Posts and threads against the stock indexer: every embed kind, deleting posts that have
// replies, quotes, reposts and embeds, replies to deleted or missing parents (invalidReplyRoot),
// replies indexed before their parent, reply notifications in chains deeper than five levels,
// self-interactions (no self-notifications), mentions of unknown DIDs, and post edits.
import path from 'node:path'
import { describe, expect, it } from 'vitest'
import { compareIndexers } from '../harness/compare-indexers.ts'
import { createUser, IMAGES } from '../harness/seed.ts'
import type { StockNetwork } from '../harness/stock-network.ts'

type Ref = { uri: string; cid: string }
type Rec = Record<string, unknown>

const POST = 'app.bsky.feed.post'
const UNKNOWN_DID = 'did:plc:unknownunknownunknown1'
const FAKE_CID = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'

/** Record writes through the PDS, each waited for: the stock indexes repos concurrently. */
function writer(net: StockNetwork) {
  const { sc, network } = net
  const opts = (did: string) => ({
    headers: sc.getHeaders(did as never),
    encoding: 'application/json' as const,
  })
  const split = (uri: string) => uri.replace('at://', '').split('/') as [string, string, string]
  const create = async (did: string, collection: string, record: Rec, rkey?: string) => {
    const res = await sc.agent.com.atproto.repo.createRecord(
      {
        repo: did,
        collection,
        rkey,
        record: { $type: collection, createdAt: new Date().toISOString(), ...record },
      },
      opts(did),
    )
    await network.processAll()
    return { uri: res.data.uri, cid: res.data.cid }
  }
  return {
    create,
    post: (did: string, text: string, extra: Rec = {}) => create(did, POST, { text, ...extra }),
    reply: (did: string, root: Ref, parent: Ref, text: string) =>
      create(did, POST, { text, reply: { root, parent } }),
    quote: (did: string, subject: Ref, text: string) =>
      create(did, POST, { text, embed: { $type: 'app.bsky.embed.record', record: subject } }),
    async remove(uri: string) {
      const [did, collection, rkey] = split(uri)
      await sc.agent.com.atproto.repo.deleteRecord({ repo: did, collection, rkey }, opts(did))
      await network.processAll()
    },
    async put(uri: string, record: Rec) {
      const [did, collection, rkey] = split(uri)
      const res = await sc.agent.com.atproto.repo.putRecord(
        {
          repo: did,
          collection,
          rkey,
          record: { $type: collection, createdAt: new Date().toISOString(), ...record },
        },
        opts(did),
      )
      await network.processAll()
      return { uri: res.data.uri, cid: res.data.cid }
    },
  }
}

const mention = (did: string) => ({
  index: { byteStart: 0, byteEnd: 4 },
  features: [{ $type: 'app.bsky.richtext.facet#mention', did }],
})

async function scenario(net: StockNetwork) {
  const w = writer(net)
  const { sc } = net
  const users: string[] = []
  for (const name of ['alice', 'bob', 'carol', 'dan', 'erin', 'fred', 'gina', 'hank']) {
    users.push(await createUser(sc, name))
  }
  const [alice, bob, carol, dan] = users as [string, string, string, string]
  const upload = async (did: string, file: string, mime: string) =>
    (await sc.uploadFile(did as never, path.join(IMAGES, file), mime)).image

  // Every embed kind, then the post goes (with its quotes, reposts, replies and embeds).
  const img = await upload(alice, 'landscape.jpg', 'image/jpeg')
  const withImages = await w.post(alice, 'two images', {
    embed: {
      $type: 'app.bsky.embed.images',
      images: [
        { image: img, alt: 'one' },
        { image: img, alt: 'two', aspectRatio: { width: 4, height: 3 } },
      ],
    },
    langs: ['en', 'de'],
    tags: ['first', 'second'],
  })
  const external = await w.post(alice, 'a link', {
    embed: {
      $type: 'app.bsky.embed.external',
      external: { uri: 'https://example.com', title: 'Example', description: 'A site', thumb: img },
    },
  })
  await w.post(bob, 'a bare link', {
    embed: {
      $type: 'app.bsky.embed.external',
      external: { uri: 'https://example.org', title: '', description: '' },
    },
  })
  const uploadVideo = async (did: string) =>
    (
      await sc.agent.com.atproto.repo.uploadBlob(new Uint8Array(2048).fill(7), {
        headers: sc.getHeaders(did as never),
        encoding: 'video/mp4',
      })
    ).data.blob
  const bobsVideo = await uploadVideo(bob)
  const withVideo = await w.post(bob, 'a video', {
    embed: { $type: 'app.bsky.embed.video', video: bobsVideo },
  })
  await w.post(bob, 'a video with alt', {
    embed: { $type: 'app.bsky.embed.video', video: bobsVideo, alt: 'moving pictures' },
  })
  const carolsImg = await upload(carol, 'portrait.jpg', 'image/jpeg')
  const gallery = await w.post(carol, 'a gallery', {
    embed: {
      $type: 'app.bsky.embed.gallery',
      items: [
        {
          $type: 'app.bsky.embed.gallery#image',
          image: carolsImg,
          alt: 'a',
          aspectRatio: { width: 1, height: 1 },
        },
        { $type: 'com.example.future#item', whatever: true },
        {
          $type: 'app.bsky.embed.gallery#image',
          image: carolsImg,
          alt: 'c',
          aspectRatio: { width: 2, height: 1 },
        },
      ],
    },
  })
  const quoteWithVideo = await w.post(dan, 'quote with video', {
    embed: {
      $type: 'app.bsky.embed.recordWithMedia',
      record: { record: withImages },
      media: { $type: 'app.bsky.embed.video', video: await uploadVideo(dan) },
    },
  })
  const quoteOfQuote = await w.quote(carol, quoteWithVideo, 'quoting a quote')
  await w.quote(bob, withImages, 'quoting images')
  await w.create(bob, 'app.bsky.feed.repost', { subject: withImages })
  await w.create(carol, 'app.bsky.feed.like', { subject: withImages })
  const replyToImages = await w.reply(carol, withImages, withImages, 'nice pics')
  await w.reply(dan, withImages, replyToImages, 'agreed')
  await w.quote(dan, { uri: external.uri, cid: FAKE_CID }, 'quoting with a wrong cid')
  await w.create(alice, 'app.bsky.feed.generator', {
    did: 'did:web:feed.example',
    displayName: 'feed',
  })
  await w.quote(
    bob,
    { uri: `at://${alice}/app.bsky.feed.generator/nothere`, cid: FAKE_CID },
    'embeds a feed',
  )

  // Delete the quoted post first, then a quoter; then quote the deleted post again. A reply to
  // a surviving reply of a deleted root stays valid; a reply to the deleted post itself is not.
  await w.remove(withImages.uri)
  await w.reply(users[7]!, withImages, replyToImages, 'reply to a reply of a deleted root')
  await w.reply(bob, withImages, withImages, 'reply to a deleted post')
  await w.remove(quoteWithVideo.uri)
  await w.quote(carol, withImages, 'quoting the deleted post')
  await w.remove(quoteOfQuote.uri)
  await w.remove(withVideo.uri)
  await w.remove(gallery.uri)
  await w.remove(external.uri)

  // Invalid roots: a root that is a reply, a parent from another thread, chains under them.
  const root = await w.post(alice, 'thread root')
  const r1 = await w.reply(bob, root, root, 'valid reply')
  const wrongRoot = await w.reply(carol, r1, r1, 'treats a reply as root')
  await w.reply(dan, r1, wrongRoot, 'under the wrong root')
  const other = await w.post(bob, 'another thread')
  const mixed = await w.reply(carol, root, other, 'parent from another thread')
  await w.reply(alice, root, mixed, 'under the mixed one')
  await w.reply(
    dan,
    root,
    { uri: `at://${bob}/${POST}/3kmissingmis2`, cid: FAKE_CID },
    'missing parent',
  )

  // A reply indexed before its parent: the parent later appears at the referenced rkey.
  const early = { uri: `at://${bob}/${POST}/3kearlypar22a`, cid: FAKE_CID }
  await w.reply(carol, root, early, 'reply before its parent')
  await w.create(bob, POST, { text: 'late parent', reply: { root, parent: root } }, '3kearlypar22a')

  // A chain eight deep, one author per level: notifications reach four levels up.
  let parent: Ref = await w.post(users[0]!, 'deep root')
  const deepRoot = parent
  for (const [i, did] of users.slice(1).entries()) {
    parent = await w.reply(did, deepRoot, parent, `level ${i + 1}`)
  }
  // Authors recurring in the chain are notified once, at the nearest level.
  await w.reply(users[3]!, deepRoot, parent, 'level 8, again')

  // Self-interactions notify nobody (a self-follow does, as in the stock).
  const mine = await w.post(alice, 'self', { facets: [mention(alice)] })
  await w.reply(alice, mine, mine, 'replying to myself')
  await w.quote(alice, mine, 'quoting myself')
  await w.create(alice, 'app.bsky.feed.repost', { subject: mine })
  await w.create(alice, 'app.bsky.feed.like', { subject: mine })
  await w.create(alice, 'app.bsky.graph.follow', { subject: alice })
  // Mentions of unknown DIDs and repeated mentions.
  await w.post(bob, 'to strangers', {
    facets: [mention(UNKNOWN_DID), mention(carol), mention(carol), mention(bob)],
  })
  await w.post(carol, 'mention and quote the same person', {
    facets: [mention(bob)],
    embed: { $type: 'app.bsky.embed.record', record: other },
  })

  // OP replies: the OP replies in their own thread, deletes one, edits one.
  const opRoot = await w.post(dan, 'op thread')
  const opReply = await w.reply(dan, opRoot, opRoot, 'op one')
  const opDeleted = await w.reply(dan, opRoot, opReply, 'op two')
  await w.reply(bob, opRoot, opReply, 'not the op')
  await w.remove(opDeleted.uri)
  await w.put(opReply.uri, { text: 'op one, edited', reply: { root: opRoot, parent: opRoot } })

  // Post edits: a quote switching subject, a post gaining a mention.
  const quoter = await w.quote(carol, other, 'first subject')
  await w.put(quoter.uri, {
    text: 'second subject',
    embed: { $type: 'app.bsky.embed.record', record: root },
  })
  await w.put(other.uri, { text: 'another thread, edited', facets: [mention(dan)] })
  await w.create(carol, 'app.bsky.feed.repost', { subject: root })
  await w.put(root.uri, { text: 'thread root, edited' })
}

describe('plugins: posts and threads', () => {
  const run = compareIndexers(scenario)

  it('exercised the cases', async () => {
    const db = run().ours.db.db
    const invalid = await db
      .selectFrom('post')
      .where('invalidReplyRoot', '=', true)
      .select('text')
      .execute()
    expect(invalid.map((p) => p.text).sort()).toEqual(
      [
        'reply to a deleted post',
        'treats a reply as root',
        'under the wrong root',
        'parent from another thread',
        'under the mixed one',
        'missing parent',
        'reply before its parent',
      ].sort(),
    )
    const deep = await db
      .selectFrom('notification')
      .innerJoin('post', 'post.uri', 'notification.recordUri')
      .where('post.text', '=', 'level 7')
      .where('reason', '=', 'reply')
      .select('notification.did')
      .execute()
    expect(deep).toHaveLength(4)
    const selfNotified = await db
      .selectFrom('notification')
      .whereRef('did', '=', 'author')
      .select('reason')
      .execute()
    expect(selfNotified.map((n) => n.reason)).toEqual(['follow'])
    expect(await db.selectFrom('post_embed_video').select('postUri').execute()).toHaveLength(1)
    expect(
      await db.selectFrom('op_thread_reply').where('deletedAt', 'is not', null).execute(),
    ).toHaveLength(2)
  })
})

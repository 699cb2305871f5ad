// Threadgates and postgates against the stock indexer: replies judged by every rule kind, gates
// created after replies or deleted, hidden replies cutting notifications, mismatched gates, and
// quotes of posts whose postgate disables embedding (or only detaches quotes).
import path from 'node:path'
import { describe, expect, it } from 'vitest'
import { compareIndexers } from '../harness/compare-indexers.ts'
import { createUser, IMAGES } from '../harness/seed.ts'
import type { StockNetwork } from '../harness/stock-network.ts'

type Ref = { uri: string; cid: string }
type Rec = Record<string, unknown>

const rkeyOf = (uri: string) => uri.split('/').pop()!

/** Record writes through the PDS, each waited for: the stock indexes repos concurrently. */
function writer(net: StockNetwork) {
  const { sc, network } = net
  const opts = (did: string) => ({
    headers: sc.getHeaders(did as never),
    encoding: 'application/json' as const,
  })
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
    post: (did: string, text: string, extra: Rec = {}) =>
      create(did, 'app.bsky.feed.post', { text, ...extra }),
    reply: (did: string, root: Ref, parent: Ref, text: string) =>
      create(did, 'app.bsky.feed.post', { text, reply: { root, parent } }),
    quote: (did: string, subject: Ref, text: string) =>
      create(did, 'app.bsky.feed.post', {
        text,
        embed: { $type: 'app.bsky.embed.record', record: subject },
      }),
    async remove(uri: string) {
      const [did, collection, rkey] = uri.replace('at://', '').split('/') as [
        string,
        string,
        string,
      ]
      await sc.agent.com.atproto.repo.deleteRecord({ repo: did, collection, rkey }, opts(did))
      await network.processAll()
    },
    async put(uri: string, record: Rec) {
      const [did, collection, rkey] = uri.replace('at://', '').split('/') as [
        string,
        string,
        string,
      ]
      await sc.agent.com.atproto.repo.putRecord(
        {
          repo: did,
          collection,
          rkey,
          record: { $type: collection, createdAt: new Date().toISOString(), ...record },
        },
        opts(did),
      )
      await network.processAll()
    },
  }
}

const TG = 'app.bsky.feed.threadgate'
const PG = 'app.bsky.feed.postgate'

async function scenario(net: StockNetwork) {
  const w = writer(net)
  const { sc } = net
  const [alice, bob, carol, dan] = [
    await createUser(sc, 'alice'),
    await createUser(sc, 'bob'),
    await createUser(sc, 'carol'),
    await createUser(sc, 'dan'),
  ]
  await sc.follow(bob, alice)
  await sc.follow(alice, carol)
  const list = await w.create(alice, 'app.bsky.graph.list', {
    name: 'repliers',
    purpose: 'app.bsky.graph.defs#curatelist',
  })
  await w.create(alice, 'app.bsky.graph.listitem', { subject: bob, list: list.uri })
  const gate = (post: Ref, record: Rec) =>
    w.create(alice, TG, { post: post.uri, ...record }, rkeyOf(post.uri))

  // allow: [] lets nobody but the author reply, also deeper in the thread.
  const closed = await w.post(alice, 'nobody may reply')
  await gate(closed, { allow: [] })
  const bobsReply = await w.reply(bob, closed, closed, 'sneaking in')
  await w.reply(alice, closed, closed, 'the author may')
  await w.reply(carol, closed, bobsReply, 'nested under a violator')
  await w.reply(alice, closed, bobsReply, 'author under a violator')

  // One post per rule kind: one replier allowed, one not.
  const followers = await w.post(alice, 'followers only')
  await gate(followers, { allow: [{ $type: `${TG}#followerRule` }] })
  await w.reply(bob, followers, followers, 'i follow alice')
  await w.reply(carol, followers, followers, 'i do not')
  const following = await w.post(alice, 'people i follow')
  await gate(following, { allow: [{ $type: `${TG}#followingRule` }] })
  await w.reply(carol, following, following, 'alice follows me')
  await w.reply(dan, following, following, 'she does not follow me')
  const mentioned = await w.post(alice, 'hey dan', {
    facets: [
      {
        index: { byteStart: 4, byteEnd: 7 },
        features: [{ $type: 'app.bsky.richtext.facet#mention', did: dan }],
      },
    ],
  })
  await gate(mentioned, { allow: [{ $type: `${TG}#mentionRule` }] })
  await w.reply(dan, mentioned, mentioned, 'i was mentioned')
  await w.reply(bob, mentioned, mentioned, 'i was not')
  const listed = await w.post(alice, 'list members')
  await gate(listed, { allow: [{ $type: `${TG}#listRule`, list: list.uri }] })
  await w.reply(bob, listed, listed, 'on the list')
  await w.reply(carol, listed, listed, 'not on the list')
  const open = await w.post(alice, 'gate without allow')
  await gate(open, { hiddenReplies: [] })
  await w.reply(dan, open, open, 'anyone may')

  // A gate created after replies leaves them alone; deleting it frees later ones.
  const late = await w.post(alice, 'gated later')
  const early = await w.reply(bob, late, late, 'before the gate')
  await w.reply(carol, late, early, 'also before')
  const lateGate = await gate(late, { allow: [] })
  await w.reply(dan, late, late, 'after the gate')
  await w.put(lateGate.uri, { post: late.uri, allow: [{ $type: `${TG}#mentionRule` }] })
  await w.reply(carol, late, late, 'after the gate update')
  await w.remove(lateGate.uri)
  await w.reply(dan, late, late, 'after the gate is gone')

  // Hidden replies: the hidden reply's author hears of replies to it, those above do not.
  const hiding = await w.post(alice, 'hiding a reply')
  const hidden = await w.reply(bob, hiding, hiding, 'to be hidden')
  await gate(hiding, { hiddenReplies: [hidden.uri] })
  const under = await w.reply(carol, hiding, hidden, 'under the hidden reply')
  await w.reply(dan, hiding, under, 'deeper under it')

  // A gate whose rkey or repo does not match its post is dropped outright.
  const other = await w.post(alice, 'gated by a stray record')
  await w.create(alice, TG, { post: other.uri, allow: [] }, '3kstraystray2')
  await w.create(bob, TG, { post: other.uri, allow: [] }, rkeyOf(other.uri))
  await w.reply(carol, other, other, 'the stray gates do not count')

  // Postgates: disabled embedding, detached quotes only, the author's own quote, removal.
  const quoted = await w.post(bob, 'quote me if you can')
  const postgate = await w.create(
    bob,
    PG,
    { post: quoted.uri, embeddingRules: [{ $type: `${PG}#disableRule` }] },
    rkeyOf(quoted.uri),
  )
  const carolsQuote = await w.quote(carol, quoted, 'quoting anyway')
  await w.quote(bob, quoted, 'my own quote')
  const image = await sc.uploadFile(dan as never, path.join(IMAGES, 'landscape.jpg'), 'image/jpeg')
  await w.create(dan, 'app.bsky.feed.post', {
    text: 'quote with media',
    embed: {
      $type: 'app.bsky.embed.recordWithMedia',
      record: { record: quoted },
      media: { $type: 'app.bsky.embed.images', images: [{ image: image.image, alt: 'pic' }] },
    },
  })
  await w.put(postgate.uri, { post: quoted.uri, detachedEmbeddingUris: [carolsQuote.uri] })
  await w.quote(dan, quoted, 'only detached ones are out')
  await w.remove(postgate.uri)
  await w.quote(alice, quoted, 'no gate any more')
  const bobsOther = await w.post(bob, 'gate then delete the post')
  await w.create(bob, PG, { post: bobsOther.uri, embeddingRules: [] }, rkeyOf(bobsOther.uri))
  await w.remove(bobsOther.uri)
}

describe('plugins: threadgates and postgates', () => {
  const run = compareIndexers(scenario)

  it('exercised the gates', async () => {
    const db = run().ours.db.db
    const violators = await db
      .selectFrom('post')
      .where('violatesThreadGate', '=', true)
      .select('text')
      .execute()
    expect(violators.map((p) => p.text).sort()).toEqual(
      [
        'sneaking in',
        'nested under a violator',
        'i do not',
        'she does not follow me',
        'i was not',
        'not on the list',
        'after the gate',
        'after the gate update',
      ].sort(),
    )
    const embedViolators = await db
      .selectFrom('post')
      .where('violatesEmbeddingRules', '=', true)
      .select('text')
      .execute()
    expect(embedViolators.map((p) => p.text).sort()).toEqual(['quote with media', 'quoting anyway'])
    expect(await db.selectFrom('thread_gate').select('uri').execute()).toHaveLength(7)
  })
})

// Records that fail lexicon validation (written with `validate: false`, so the PDS takes them)
// are skipped by both indexers, `record` row included; valid records around them, in the same
// repos, are indexed as usual. Open unions and unknown fields are not invalid.
import path from 'node:path'
import { describe, expect, it } from 'vitest'
import { compareIndexers } from '../harness/compare-indexers.ts'
import { createUser, IMAGES } from '../harness/seed.ts'
import type { StockNetwork } from '../harness/stock-network.ts'

type Rec = Record<string, unknown>

const CID = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
const now = () => new Date().toISOString()

async function scenario(net: StockNetwork): Promise<{ invalid: string[]; valid: string[] }> {
  const { sc, network } = net
  const [alice, bob] = [await createUser(sc, 'alice'), await createUser(sc, 'bob')]
  const write = async (did: string, collection: string, record: Rec) => {
    const res = await sc.agent.com.atproto.repo.createRecord(
      { repo: did, collection, validate: false, record: { $type: collection, ...record } },
      { headers: sc.getHeaders(did as never), encoding: 'application/json' },
    )
    return res.data.uri
  }
  const post = (text: unknown, extra: Rec = {}) =>
    write(alice, 'app.bsky.feed.post', { text, createdAt: now(), ...extra })
  const subject = { uri: `at://${bob}/app.bsky.feed.post/3kaaaaaaaaa22`, cid: CID }
  const { image } = await sc.uploadFile(
    alice as never,
    path.join(IMAGES, 'portrait.jpg'),
    'image/jpeg',
  )

  const valid = [await post('before the bad ones')]
  const invalid = [
    await post(42),
    await post('x'.repeat(3001)),
    await post('bad date', { createdAt: 'yesterday' }),
    await post('bad language', { langs: ['not a language!'] }),
    await post('reply without parent', { reply: { root: subject } }),
    await post('image without alt', {
      embed: { $type: 'app.bsky.embed.images', images: [{ image }] },
    }),
    await write(alice, 'app.bsky.feed.like', { createdAt: now() }),
    await write(alice, 'app.bsky.graph.follow', { subject: 'bob.test', createdAt: now() }),
    await write(alice, 'app.bsky.feed.repost', {
      subject: { uri: subject.uri, cid: 'notacid' },
      createdAt: now(),
    }),
    await write(alice, 'app.bsky.graph.verification', {
      subject: bob,
      displayName: 'Bob',
      createdAt: now(),
    }),
    await write(bob, 'app.bsky.actor.profile', { displayName: 'b'.repeat(65) }),
  ]
  valid.push(
    await post('unknown facet feature and field', {
      facets: [
        { index: { byteStart: 0, byteEnd: 1 }, features: [{ $type: 'com.example.facet#thing' }] },
      ],
      somethingNew: { nested: true },
    }),
    await write(alice, 'app.bsky.feed.like', { subject, createdAt: now() }),
    await write(alice, 'app.bsky.graph.follow', { subject: bob, createdAt: now() }),
    await post('after the bad ones'),
  )
  await network.processAll()
  return { invalid, valid }
}

describe('plugins: records failing lexicon validation', () => {
  const run = compareIndexers(scenario)

  it('skipped the invalid records and kept the valid ones', async () => {
    const found = async (list: string[]) =>
      (
        await run().ours.db.db.selectFrom('record').where('uri', 'in', list).select('uri').execute()
      ).map((r) => r.uri)
    expect(await found(run().result.invalid)).toEqual([])
    expect((await found(run().result.valid)).sort()).toEqual([...run().result.valid].sort())
    const posts = await run().ours.db.db.selectFrom('post').select('text').execute()
    expect(posts.map((p) => p.text).sort()).toEqual(
      ['after the bad ones', 'before the bad ones', 'unknown facet feature and field'].sort(),
    )
  })
})

// Graph and declaration records against the stock indexer: labeler and profile records under
// other rkeys than `self` (kept in `record` only), reference-list opt-outs (valid, malformed
// subject, duplicates that are never promoted), list items on someone else's list (dropped
// outright), and deletion of lists, starter packs, feed generators, blocks and labelers.
import { describe, expect, it } from 'vitest'
import { compareIndexers } from '../harness/compare-indexers.ts'
import { createUser } from '../harness/seed.ts'
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
  return {
    async create(
      did: string,
      collection: string,
      record: Rec,
      rkey?: string,
      validate?: false,
    ): Promise<Ref> {
      const res = await sc.agent.com.atproto.repo.createRecord(
        {
          repo: did,
          collection,
          rkey,
          validate,
          record: { $type: collection, createdAt: new Date().toISOString(), ...record },
        },
        opts(did),
      )
      await network.processAll()
      return { uri: res.data.uri, cid: res.data.cid }
    },
    async remove(uri: string) {
      const [did, collection, rkey] = uri.replace('at://', '').split('/') as [
        string,
        string,
        string,
      ]
      await sc.agent.com.atproto.repo.deleteRecord({ repo: did, collection, rkey }, opts(did))
      await network.processAll()
    },
  }
}

const LABELER = 'app.bsky.labeler.service'
const OPT_OUT = 'app.bsky.graph.referencelistoptout'

async function scenario(net: StockNetwork) {
  const w = writer(net)
  const { sc } = net
  const [alice, bob, carol] = [
    await createUser(sc, 'alice'),
    await createUser(sc, 'bob'),
    await createUser(sc, 'carol'),
  ]
  const policies = { labelValues: ['spam'] }
  await w.create(alice, LABELER, { policies }, 'self')
  await w.create(alice, LABELER, { policies }, 'other', false)
  const bobsLabeler = await w.create(bob, LABELER, { policies }, 'self')
  await w.remove(bobsLabeler.uri)
  await w.create(carol, 'app.bsky.actor.profile', { displayName: 'not self' }, 'notself', false)

  // Lists: items on one's own list, on someone else's (dropped), list and pack deletion.
  const curate = { purpose: 'app.bsky.graph.defs#curatelist' }
  const list = await w.create(alice, 'app.bsky.graph.list', { name: 'friends', ...curate })
  await w.create(alice, 'app.bsky.graph.listitem', { subject: bob, list: list.uri })
  await w.create(bob, 'app.bsky.graph.listitem', { subject: carol, list: list.uri })
  const doomed = await w.create(bob, 'app.bsky.graph.list', { name: 'doomed', ...curate })
  await w.create(bob, 'app.bsky.graph.listitem', { subject: alice, list: doomed.uri })
  await w.create(carol, 'app.bsky.graph.listblock', { subject: doomed.uri })
  const pack = await w.create(bob, 'app.bsky.graph.starterpack', {
    name: 'doomed pack',
    list: doomed.uri,
  })
  await w.remove(doomed.uri)
  await w.remove(pack.uri)
  const feed = await w.create(carol, 'app.bsky.feed.generator', {
    did: 'did:web:feed.example',
    displayName: 'f',
  })
  await w.remove(feed.uri)
  const block = await w.create(carol, 'app.bsky.graph.block', { subject: alice })
  await w.create(carol, 'app.bsky.graph.block', { subject: bob })
  await w.remove(block.uri)

  // Reference-list opt-outs: valid, malformed subjects (record only), a duplicate never promoted.
  const ref = await w.create(alice, 'app.bsky.graph.list', {
    name: 'reference',
    purpose: 'app.bsky.graph.defs#referencelist',
  })
  const o1 = await w.create(bob, OPT_OUT, { subject: ref.uri })
  await w.create(bob, OPT_OUT, { subject: ref.uri })
  await w.remove(o1.uri)
  await w.create(carol, OPT_OUT, { subject: ref.uri })
  await w.create(carol, OPT_OUT, { subject: `at://${alice}/app.bsky.feed.post/3kaaaaaaaaa22` })
  await w.create(carol, OPT_OUT, { subject: `at://alice.test/app.bsky.graph.list/3kaaaaaaaaa22` })
  // Not an at-uri the lexicon accepts: skipped by both, `record` included.
  await w.create(carol, OPT_OUT, { subject: `${ref.uri}#fragment` }, undefined, false)
}

describe('plugins: graph and declarations', () => {
  const run = compareIndexers(scenario)

  it('exercised the cases', async () => {
    const db = run().ours.db.db
    const count = async (
      table: 'labeler' | 'list_item' | 'reference_list_opt_out' | 'record',
      like: string,
    ) => (await db.selectFrom(table).where('uri', 'like', like).select('uri').execute()).length
    // (dev-env's own labeler account has a labeler too)
    expect(await count('record', `%${LABELER}/other`)).toBe(1)
    expect(await count('labeler', `%${LABELER}/other`)).toBe(0)
    expect(await count('record', '%app.bsky.actor.profile/notself')).toBe(1)
    expect(await count('list_item', '%')).toBe(2)
    expect(await count('record', '%app.bsky.graph.listitem%')).toBe(2)
    // bob's duplicate stays unindexed after the original goes; carol's valid one is indexed.
    expect(await count('reference_list_opt_out', '%')).toBe(1)
    expect(await count('record', `%${OPT_OUT}%`)).toBe(4)
  })
})

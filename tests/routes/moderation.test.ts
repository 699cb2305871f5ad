// Moderation and drafts, differentially: takedown reads over the seeded index, takedown writes
// through ours and through the stock on twin subjects (read back through both), upstream status,
// and drafts stored through the AppView.
import { Code } from '@connectrpc/connect'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { act } from '../harness/appview-diff.ts'
import { startOurServer, type OurServer } from '../harness/ours.ts'
import { seedBasic } from '../harness/seed.ts'
import {
  startStockNetwork,
  type DataplaneClient,
  type StockNetwork,
} from '../harness/stock-network.ts'
import { didsOf, differ, json, WALK_LIMITS, type Did, type Differ } from './diff.ts'

const MISSING_DID = 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa'
const MISSING_URI = `at://${MISSING_DID}/app.bsky.feed.post/3kaaaaaaaaaaa`
const MISSING_CID = 'bafyreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'

describe('moderation and draft routes', () => {
  let net: StockNetwork
  let ours: OurServer
  let client: DataplaneClient
  let d: Differ
  let dids: Record<string, string>
  let records: string[]
  let blobs: { did: string; cid: string }[]

  beforeAll(async () => {
    net = await startStockNetwork()
    dids = await seedBasic(net.sc)
    const { alice, bob } = didsOf(dids, 'alice', 'bob')
    await seedDrafts(net, alice, 7)
    await seedDrafts(net, bob, 1)
    await net.network.processAll()
    ours = await startOurServer({
      schema: net.schema,
      plcUrl: net.network.plc.url,
      pdsUrl: net.network.pds.url,
    })
    client = net.clientFor(ours.server.url)
    d = differ(client, net.stock)
    const db = ours.db.db
    records = (await db.selectFrom('record').select('uri').orderBy('uri').execute()).map(
      (r) => r.uri,
    )
    blobs = await db
      .selectFrom('post_embed_image')
      .innerJoin('post', 'post.uri', 'post_embed_image.postUri')
      .select(['post.creator as did', 'post_embed_image.imageCid as cid'])
      .orderBy('post_embed_image.imageCid')
      .execute()
  })
  afterAll(async () => {
    await ours?.close()
    await net?.close()
  })

  const takedownState = async () => {
    for (const did of [...Object.values(dids), MISSING_DID]) {
      await d.same(`actor ${did}`, (c) => c.getActorTakedown({ did }))
    }
    for (const recordUri of [...records, MISSING_URI]) {
      await d.same(`record ${recordUri}`, (c) => c.getRecordTakedown({ recordUri }))
    }
    for (const { did, cid } of [...blobs, { did: MISSING_DID, cid: MISSING_CID }]) {
      await d.same(`blob ${did} ${cid}`, (c) => c.getBlobTakedown({ did, cid }))
    }
  }

  it('takedown reads over the untouched index', async () => {
    expect(records.length).toBeGreaterThan(20)
    expect(blobs.length).toBeGreaterThan(1)
    await takedownState()
  })

  it('takedowns through ours and through the stock read back the same', async () => {
    const [blobA, blobB] = [blobs[0]!, blobs[1]!]
    const [recA, recB] = [records[0]!, records[1]!]
    const pairs = [
      [client, dids.bob!, recA, blobA],
      [net.stock, dids.dan!, recB, blobB],
    ] as const
    for (const [writer, did, recordUri, blob] of pairs) {
      await writer.takedownActor({ did, ref: 'mod-1' })
      await writer.takedownRecord({ recordUri })
      await writer.takedownBlob({ ...blob, ref: 'blob-1' })
      // Missing subjects: nothing to update, no error.
      await writer.takedownActor({ did: MISSING_DID })
      await writer.takedownRecord({ recordUri: MISSING_URI })
    }
    await takedownState()
    const twin = async <T extends { toJson(): unknown }>(a: Promise<T>, b: Promise<T>) => {
      const [x, y] = await Promise.all([a, b])
      expect(x.toJson()).toEqual(y.toJson())
      return x
    }
    const actor = await twin(
      client.getActorTakedown({ did: dids.bob! }),
      client.getActorTakedown({ did: dids.dan! }),
    )
    expect(json(actor)).toEqual({ takenDown: true, takedownRef: 'mod-1' })
    const record = await twin(
      client.getRecordTakedown({ recordUri: recA }),
      client.getRecordTakedown({ recordUri: recB }),
    )
    expect(json(record)).toEqual({ takenDown: true, takedownRef: 'TAKEDOWN' })
    const blob = await twin(client.getBlobTakedown(blobA), client.getBlobTakedown(blobB))
    expect(json(blob)).toEqual({ takenDown: true, takedownRef: 'blob-1' })
    await d.bothReject(
      'blob twice',
      (c) => c.takedownBlob({ ...blobA, ref: 'again' }),
      Code.AlreadyExists,
    )

    for (const [writer, did, recordUri, blob] of pairs) {
      await writer.untakedownActor({ did })
      await writer.untakedownRecord({ recordUri })
      await writer.untakedownBlob(blob)
    }
    await takedownState()
    expect(json(await client.getBlobTakedown(blobA))).toEqual({})
  })

  it('UpdateActorUpstreamStatus through ours and through the stock', async () => {
    await client.updateActorUpstreamStatus({ actorDid: dids.bob!, upstreamStatus: 'deactivated' })
    await net.stock.updateActorUpstreamStatus({
      actorDid: dids.dan!,
      upstreamStatus: 'deactivated',
    })
    await client.updateActorUpstreamStatus({ actorDid: MISSING_DID, upstreamStatus: 'takendown' })
    const rows = await ours.db.db
      .selectFrom('actor')
      .where('did', 'in', [dids.bob!, dids.dan!])
      .select('upstreamStatus')
      .execute()
    expect(rows.map((r) => r.upstreamStatus)).toEqual(['deactivated', 'deactivated'])
    const actors = await net.stock.getActors({ dids: [dids.bob!, dids.dan!] })
    expect(actors.actors.map((a) => a.upstreamStatus)).toEqual(['deactivated', 'deactivated'])
    for (const [writer, actorDid] of [
      [client, dids.bob!],
      [net.stock, dids.dan!],
    ] as const) {
      await writer.updateActorUpstreamStatus({ actorDid, upstreamStatus: '' })
    }
    const after = await net.stock.getActors({ dids: [dids.bob!, dids.dan!] })
    expect(after.actors.map((a) => a.upstreamStatus)).toEqual(['', ''])
  })

  it('GetActorDrafts: walked for every actor; bad cursors rejected', async () => {
    for (const actorDid of [...Object.values(dids), MISSING_DID]) {
      for (const limit of WALK_LIMITS) {
        await d.walk(`drafts ${actorDid} ${limit}`, (c, cursor) =>
          c.getActorDrafts({ actorDid, limit, cursor }),
        )
      }
    }
    const all = await d.same('alice', (c) => c.getActorDrafts({ actorDid: dids.alice!, limit: 50 }))
    expect(all.drafts).toHaveLength(7)
    const cursor = new Date().toISOString()
    await d.same('iso cursor', (c) => c.getActorDrafts({ actorDid: dids.alice!, limit: 3, cursor }))
    for (const bad of ['nope', '2024__x']) {
      await d.bothReject(
        `drafts ${bad}`,
        (c) => c.getActorDrafts({ actorDid: dids.alice!, cursor: bad }),
        Code.InvalidArgument,
      )
    }
  })
})

/** Drafts through the AppView's createDraft (stored via bsync), the first one then updated. */
async function seedDrafts(net: StockNetwork, did: Did, count: number): Promise<void> {
  const call = async (nsid: string, body: unknown) =>
    (await act(net, did, nsid, body)) as { id?: string }
  const ids: string[] = []
  for (let i = 0; i < count; i++) {
    const { id } = await call('app.bsky.draft.createDraft', {
      draft: { posts: [{ text: `draft ${i}` }] },
    })
    ids.push(id!)
    await net.network.processAll()
  }
  await call('app.bsky.draft.updateDraft', {
    draft: { id: ids[0], draft: { posts: [{ text: 'draft 0, edited' }] } },
  })
}

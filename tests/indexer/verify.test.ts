// Verifying mode checks commit signatures and MST proofs against the repo's key; trusted mode (the
// stock's) takes the relay's word. A forged commit for a real account is refused only by the former.
import { registry } from '@openplane/telemetry'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startFakeRelay, type FakeRelay } from '../harness/fake-relay.ts'
import { commitFrame } from '../harness/frames.ts'
import {
  diffSchemas,
  startIndexerOn,
  startOurIndexer,
  type OurIndexer,
} from '../harness/indexer.ts'
import { seedBasic } from '../harness/seed.ts'
import { startStockNetwork, type StockNetwork } from '../harness/stock-network.ts'

async function malformedFrames(): Promise<number> {
  const m = await registry.getSingleMetric('openplane_firehose_frames_total')?.get()
  return (m?.values ?? [])
    .filter((v) => v.labels.outcome === 'malformed')
    .reduce((s, v) => s + v.value, 0)
}

describe('commit verification', () => {
  let net: StockNetwork
  let verifying: OurIndexer
  let alice: string

  beforeAll(async () => {
    net = await startStockNetwork()
    verifying = await startOurIndexer(net.network, { verify: true })
    ;({ alice } = await seedBasic(net.sc))
    await net.network.processAll()
    await verifying.catchUp()
  })
  afterAll(async () => {
    await verifying?.close()
    await net?.close()
  })

  it('indexes genuine commits exactly like the stock', async () => {
    expect(
      await diffSchemas(net.schema, verifying.schema, ['record', 'post', 'like', 'follow']),
    ).toEqual([])
  })

  describe('a forged commit', () => {
    let relay: FakeRelay
    const forged = async () => [
      {
        seq: 1,
        bytes: await commitFrame(1, alice, [
          {
            action: 'create',
            collection: 'app.bsky.feed.post',
            rkey: '3forgedforged',
            record: {
              $type: 'app.bsky.feed.post',
              text: 'not really alice',
              createdAt: new Date().toISOString(),
            },
          },
        ]),
      },
    ]
    beforeAll(async () => {
      relay = await startFakeRelay(await forged())
    })
    afterAll(async () => relay?.close())

    for (const verify of [true, false]) {
      it(verify ? 'is refused in verifying mode' : 'is accepted in trusted mode', async () => {
        const before = await malformedFrames()
        const ours = await startIndexerOn(
          {
            source: relay.url,
            plcUrl: net.network.plc.url,
            testPdsUrl: net.network.pds.url,
            headSeq: async () => 1,
          },
          { verify },
        )
        try {
          await ours.catchUp()
          const rows = await ours.db.db.selectFrom('post').select('uri').execute()
          expect(rows.length).toBe(verify ? 0 : 1)
          expect((await malformedFrames()) - before).toBe(verify ? 1 : 0)
        } finally {
          await ours.close()
        }
      })
    }
  })
})

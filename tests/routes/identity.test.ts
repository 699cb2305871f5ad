// Route-level differential test: the stock dataplane and ours read the same schema (filled by the
// stock indexer) and must answer the same requests the same way.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { seedBasic } from '../harness/seed.ts'
import { startOurServer, type OurServer } from '../harness/ours.ts'
import {
  startStockNetwork,
  type DataplaneClient,
  type StockNetwork,
} from '../harness/stock-network.ts'

describe('identity and ping routes', () => {
  let net: StockNetwork
  let ours: OurServer
  let client: DataplaneClient

  beforeAll(async () => {
    net = await startStockNetwork()
    await seedBasic(net.sc)
    await net.network.processAll()
    ours = await startOurServer({
      schema: net.schema,
      plcUrl: net.network.plc.url,
      pdsUrl: net.network.pds.url,
    })
    client = net.clientFor(ours.server.url)
  })
  afterAll(async () => {
    await ours?.close()
    await net?.close()
  })

  it('Ping', async () => {
    expect((await client.ping({})).toJson()).toEqual((await net.stock.ping({})).toJson())
  })

  it('GetIdentityByDid: same document data; unknown DID is NotFound on both', async () => {
    const did = net.sc.dids.alice!
    const [a, b] = await Promise.all([
      client.getIdentityByDid({ did }),
      net.stock.getIdentityByDid({ did }),
    ])
    const strip = (m: typeof a) => ({ ...(m.toJson() as object), updated: undefined })
    expect(strip(a)).toEqual(strip(b))
    const missing = 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa'
    await expect(client.getIdentityByDid({ did: missing })).rejects.toThrow(/not found/)
    await expect(net.stock.getIdentityByDid({ did: missing })).rejects.toThrow(/not found/)
  })

  it('GetIdentityByHandle resolves a .test handle through the PDS', async () => {
    const res = await client.getIdentityByHandle({ handle: 'alice.test' })
    expect(res.did).toBe(net.sc.dids.alice)
    expect(res.handle).toBe('alice.test')
  })
})

// Route-level differential test: the stock dataplane and ours read the same schema (filled by the
// stock indexer) and must answer the same requests the same way.
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { createIdentity } from '@openplane/identity'
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

  it('a handle that does not resolve back to the DID is handle.invalid; the cache keeps answers', async () => {
    // A "PDS" that says every handle belongs to someone else.
    const liar = http.createServer((_, res) => res.end('did:plc:someoneelsesomeoneelse'))
    await new Promise<void>((r) => liar.listen(0, '127.0.0.1', () => r()))
    try {
      const identity = createIdentity({
        plcUrl: net.network.plc.url,
        allowPrivateNetwork: true,
        testHandles: {
          suffixes: ['.test'],
          pdsUrl: `http://127.0.0.1:${(liar.address() as AddressInfo).port}`,
        },
      })
      const did = net.sc.dids.alice!
      expect((await identity.resolveDid(did))?.handle).toBe('handle.invalid')
      // Cached: a second lookup does not ask again (the liar is gone by then).
      liar.close()
      expect(await identity.resolveHandle('alice.test')).toBe('did:plc:someoneelsesomeoneelse')
      const honest = createIdentity({
        plcUrl: net.network.plc.url,
        allowPrivateNetwork: true,
        testHandles: { suffixes: ['.test'], pdsUrl: net.network.pds.url },
      })
      expect((await honest.resolveDid(did))?.handle).toBe('alice.test')
    } finally {
      liar.close()
    }
  })
})

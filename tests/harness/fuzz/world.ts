// The network's identity side for the fuzzer, on one loopback port: PLC documents (the handle
// each DID claims, this server as its PDS), /.well-known/atproto-did chosen by the Host header,
// and com.atproto.sync.getLatestCommit (RepoNotFound for deleted repos). Both indexers resolve
// through it; the driver sets the world a segment of the sequence sees before playing it.
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { Secp256k1Keypair } from '@atproto/crypto'
import type { World } from './sequence.ts'

export interface WorldServer {
  url: string
  set(world: World): void
  close(): Promise<void>
}

export async function startWorld(): Promise<WorldServer> {
  const key = await Secp256k1Keypair.create()
  const multibase = key.did().slice('did:key:'.length)
  let world: World = { claims: {}, wellKnown: {}, gone: [] }
  let url = ''
  const server = http.createServer((req, res) => {
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' })
      res.end(typeof body === 'string' ? body : JSON.stringify(body))
    }
    const u = new URL(req.url ?? '/', 'http://world')
    if (u.pathname === '/.well-known/atproto-did') {
      const host = (req.headers.host ?? '').toLowerCase()
      const did = world.wellKnown[host]
      if (!did) return send(404, 'not found')
      res.writeHead(200, { 'content-type': 'text/plain' })
      return res.end(did)
    }
    if (u.pathname === '/xrpc/com.atproto.sync.getLatestCommit') {
      const did = u.searchParams.get('did') ?? ''
      if (world.gone.includes(did) || !(did in world.claims)) {
        return send(400, { error: 'RepoNotFound', message: `Could not find repo for DID: ${did}` })
      }
      return send(200, {
        cid: 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm',
        rev: '3l3qo2vutsw2b',
      })
    }
    const did = decodeURIComponent(u.pathname.slice(1))
    const handle = world.claims[did]
    if (handle === undefined) return send(404, { message: `DID not registered: ${did}` })
    send(200, {
      '@context': ['https://www.w3.org/ns/did/v1', 'https://w3id.org/security/multikey/v1'],
      id: did,
      alsoKnownAs: [`at://${handle}`],
      verificationMethod: [
        { id: `${did}#atproto`, type: 'Multikey', controller: did, publicKeyMultibase: multibase },
      ],
      service: [{ id: '#atproto_pds', type: 'AtprotoPersonalDataServer', serviceEndpoint: url }],
    })
  })
  server.keepAliveTimeout = 60_000
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()))
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return {
    url,
    set: (w) => (world = w),
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r())
        server.closeAllConnections()
      }),
  }
}

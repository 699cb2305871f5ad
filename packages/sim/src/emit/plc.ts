// A PLC directory for the simulated users only: every did:plc made by didFor(1..users) resolves to
// a DID document with the user's handle, signing key (keys.ts) and the local PDS endpoint (the
// emitter's HTTP server). Documents are computed per request; nothing is stored.
//   GET /<did>       the DID document (what @atproto/identity's PLC resolver fetches)
//   GET /<did>/data  the PLC operation data (rotation/verification keys, handle, services)
//   404 for any DID that is not a simulated user.
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { didFor, handleFor, idForDid } from '../ids.ts'
import type { SimKeys } from './keys.ts'

export interface PlcStubOptions {
  host: string
  port: number
  keys: SimKeys
  handleDomain: string
  /** Highest simulated user id: DIDs of other ids are unknown. */
  users: number
  /** The PDS URL the documents point at. */
  pdsUrl: string
}

export interface DidDocument {
  '@context': string[]
  id: string
  alsoKnownAs: string[]
  verificationMethod: { id: string; type: string; controller: string; publicKeyMultibase: string }[]
  service: { id: string; type: string; serviceEndpoint: string }[]
}

const CONTEXT = [
  'https://www.w3.org/ns/did/v1',
  'https://w3id.org/security/multikey/v1',
  'https://w3id.org/security/suites/secp256k1-2019/v1',
]

export class PlcStub {
  readonly host: string
  private readonly server: http.Server
  private readonly opts: PlcStubOptions
  /** Documents served (a measure of how often indexers resolve identities). */
  served = 0

  private constructor(opts: PlcStubOptions, server: http.Server) {
    this.opts = opts
    this.server = server
    this.host = opts.host
  }

  static async start(opts: PlcStubOptions): Promise<PlcStub> {
    const server = http.createServer()
    const self = new PlcStub(opts, server)
    server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
      self.handle(req, res)
    })
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(opts.port, opts.host, () => resolve())
    })
    return self
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port
  }

  get url(): string {
    return `http://${this.host}:${this.port}`
  }

  /** The user id of a DID, if it is a simulated user's. */
  idOf(did: string): number | undefined {
    return idForDid(did, this.opts.users)
  }

  didDocument(id: number): DidDocument {
    const did = didFor(id)
    return {
      '@context': CONTEXT,
      id: did,
      alsoKnownAs: [`at://${handleFor(id, this.opts.handleDomain)}`],
      verificationMethod: [
        {
          id: `${did}#atproto`,
          type: 'Multikey',
          controller: did,
          publicKeyMultibase: this.opts.keys.publicKeyMultibase(id),
        },
      ],
      service: [
        {
          id: '#atproto_pds',
          type: 'AtprotoPersonalDataServer',
          serviceEndpoint: this.opts.pdsUrl,
        },
      ],
    }
  }

  /** The document's content in PLC operation form. */
  plcData(id: number) {
    const key = this.opts.keys.didKey(id)
    return {
      did: didFor(id),
      verificationMethods: { atproto: key },
      rotationKeys: [key],
      alsoKnownAs: [`at://${handleFor(id, this.opts.handleDomain)}`],
      services: {
        atproto_pds: { type: 'AtprotoPersonalDataServer', endpoint: this.opts.pdsUrl },
      },
    }
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const send = (status: number, body: unknown, type = 'application/json') => {
      res.writeHead(status, { 'content-type': type })
      res.end(typeof body === 'string' ? body : JSON.stringify(body))
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      send(405, { message: 'method not allowed' })
      return
    }
    const path = new URL(req.url ?? '/', 'http://plc').pathname
    if (path === '/_health') {
      send(200, { version: 'openplane-sim' })
      return
    }
    const m = /^\/([^/]+)(\/data)?$/.exec(path)
    let did = ''
    try {
      did = m ? decodeURIComponent(m[1]!) : ''
    } catch {
      did = ''
    }
    const id = did ? this.idOf(did) : undefined
    if (id === undefined) {
      send(404, { message: `DID not registered: ${did || path}` })
      return
    }
    this.served++
    if (m![2]) send(200, this.plcData(id))
    else send(200, this.didDocument(id), 'application/did+ld+json')
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve())
      this.server.closeAllConnections()
    })
  }
}

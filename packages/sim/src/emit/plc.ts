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

export interface PlcStubOptions extends PlcDocumentsOptions {
  host: string
  port: number
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

export interface PlcDocumentsOptions {
  keys: SimKeys
  handleDomain: string
  /** Highest simulated user id: DIDs of other ids are unknown. */
  users: number
  /** The PDS URL the documents point at. */
  pdsUrl: string
  /** Known public keys (`publicKeyMultibase`) by user id: no derivation for these. */
  publicKeys?: ReadonlyMap<number, string>
}

export interface PlcAnswer {
  status: number
  body: unknown
  type: string
}

/** The documents themselves, for any server that answers PLC requests. */
export class PlcDocuments {
  private readonly opts: PlcDocumentsOptions
  /** The PDS the documents name; a server that learns its port after listening sets it then. */
  pdsUrl: string
  /** Documents served (a measure of how often indexers resolve identities). */
  served = 0

  constructor(opts: PlcDocumentsOptions) {
    this.opts = opts
    this.pdsUrl = opts.pdsUrl
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
          publicKeyMultibase: this.publicKey(id),
        },
      ],
      service: [
        {
          id: '#atproto_pds',
          type: 'AtprotoPersonalDataServer',
          serviceEndpoint: this.pdsUrl,
        },
      ],
    }
  }

  private publicKey(id: number): string {
    return this.opts.publicKeys?.get(id) ?? this.opts.keys.publicKeyMultibase(id)
  }

  /** The document's content in PLC operation form. */
  plcData(id: number) {
    const key = `did:key:${this.publicKey(id)}`
    return {
      did: didFor(id),
      verificationMethods: { atproto: key },
      rotationKeys: [key],
      alsoKnownAs: [`at://${handleFor(id, this.opts.handleDomain)}`],
      services: {
        atproto_pds: { type: 'AtprotoPersonalDataServer', endpoint: this.pdsUrl },
      },
    }
  }

  /** The answer to GET `path` (`/<did>` or `/<did>/data`), or undefined if it is not a DID path. */
  answer(path: string): PlcAnswer | undefined {
    const m = /^\/([^/]+)(\/data)?$/.exec(path)
    if (!m) return undefined
    let did = ''
    try {
      // Resolvers send the DID percent-encoded (did%3Aplc%3A…).
      did = decodeURIComponent(m[1]!)
    } catch {
      return undefined
    }
    if (!did.startsWith('did:')) return undefined
    const id = did ? this.idOf(did) : undefined
    const json = 'application/json'
    if (id === undefined) {
      return { status: 404, body: { message: `DID not registered: ${did || path}` }, type: json }
    }
    this.served++
    if (m[2]) return { status: 200, body: this.plcData(id), type: json }
    return { status: 200, body: this.didDocument(id), type: 'application/did+ld+json' }
  }
}

export class PlcStub {
  readonly host: string
  readonly docs: PlcDocuments
  private readonly server: http.Server

  private constructor(opts: PlcStubOptions, server: http.Server) {
    this.server = server
    this.host = opts.host
    this.docs = new PlcDocuments(opts)
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

  /** Documents served so far. */
  get served(): number {
    return this.docs.served
  }

  idOf(did: string): number | undefined {
    return this.docs.idOf(did)
  }

  didDocument(id: number): DidDocument {
    return this.docs.didDocument(id)
  }

  plcData(id: number) {
    return this.docs.plcData(id)
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
    const answer = this.docs.answer(path)
    if (!answer) send(404, { message: `DID not registered: ${path}` })
    else send(answer.status, answer.body, answer.type)
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve())
      this.server.closeAllConnections()
    })
  }
}

// The writer's lookups on their own thread answer as they do on the writer's: a verified handle,
// null for a claim that does not verify, undefined for an identity that cannot be resolved,
// whether a PDS still hosts a repo (or an error when it cannot tell), DID documents and keys. A small
// HTTP server plays PLC and the PDS.
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { lookupThread, type LookupThread } from '@openplane/ingest'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

// A secp256k1 public key, multibase (the example key of the atproto specification).
const SIGNER_KEY = 'zQ3shXjHeiBuRCKmM36cuYnm7YEMzhGnCmCyW92sRJ9pribSF'

describe('lookups on their own thread', () => {
  let server: http.Server
  let lookups: LookupThread
  const asked: string[] = []

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      const url = new URL(req.url!, 'http://x')
      asked.push(url.pathname)
      const pds = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
      const doc = (did: string, handle: string) => ({
        '@context': ['https://www.w3.org/ns/did/v1'],
        id: did,
        alsoKnownAs: [`at://${handle}`],
        service: [{ id: '#atproto_pds', type: 'AtprotoPersonalDataServer', serviceEndpoint: pds }],
      })
      const docs: Record<string, object> = {
        '/did:plc:alice': doc('did:plc:alice', 'alice.test'),
        // Claims bob's handle, which points elsewhere.
        '/did:plc:mallory': doc('did:plc:mallory', 'bob.test'),
        '/did:plc:gone': doc('did:plc:gone', 'gone.test'),
        '/did:plc:broken': doc('did:plc:broken', 'broken.test'),
        '/did:plc:carol': doc('did:plc:carol', 'carol.test'),
        '/did:plc:dave': doc('did:plc:dave', 'dave.test'),
        '/did:plc:signer': {
          ...doc('did:plc:signer', 'signer.test'),
          verificationMethod: [
            {
              id: 'did:plc:signer#atproto',
              type: 'Multikey',
              controller: 'did:plc:signer',
              publicKeyMultibase: SIGNER_KEY,
            },
          ],
        },
      }
      const json = (status: number, body: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' })
        res.end(JSON.stringify(body))
      }
      if (url.pathname === '/.well-known/atproto-did') {
        const host = req.headers.host
        const owner: Record<string, string> = {
          'alice.test': 'did:plc:alice',
          'bob.test': 'did:plc:bob',
          'carol.test': 'did:plc:carol',
          'dave.test': 'did:plc:dave',
        }
        res.end(owner[host ?? ''] ?? '')
        return
      }
      if (url.pathname === '/xrpc/com.atproto.sync.getLatestCommit') {
        const did = url.searchParams.get('did')
        if (did === 'did:plc:alice') return json(200, { cid: 'x', rev: 'y' })
        if (did === 'did:plc:gone') return json(400, { error: 'RepoNotFound' })
        return json(500, { error: 'InternalServerError' })
      }
      const found = docs[decodeURIComponent(url.pathname)]
      if (found) return json(200, found)
      json(404, { message: 'DID not registered' })
    })
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    lookups = lookupThread({
      identity: {
        plcUrl: base,
        allowPrivateNetwork: true,
        testHandles: { suffixes: ['.test'], pdsUrl: base },
        timeoutMs: 1000,
      },
      timeoutMs: 1000,
    })
    // Loaded before the first lookup, as the benches start it.
    await lookups.started()
  })
  afterAll(async () => {
    await lookups.stop()
    await new Promise((r) => server.close(r))
  })

  it('resolves handles both ways, on the worker', async () => {
    const [alice, mallory, nobody] = await Promise.all([
      lookups.resolveHandle('did:plc:alice', false),
      lookups.resolveHandle('did:plc:mallory', false),
      lookups.resolveHandle('did:plc:nobody', false),
    ])
    expect(alice).toBe('alice.test')
    expect(mallory).toBeNull()
    expect(nobody).toBeUndefined()
    // Cached on the worker: asking again does not reach the network, forcing does.
    const before = asked.length
    expect(await lookups.resolveHandle('did:plc:alice', false)).toBe('alice.test')
    expect(asked.length).toBe(before)
    expect(await lookups.resolveHandle('did:plc:alice', true)).toBe('alice.test')
    expect(asked.length).toBeGreaterThan(before)
  })

  it('tells whether a repo is still hosted, and fails when the PDS cannot say', async () => {
    expect(await lookups.isHosted('did:plc:alice')).toBe(true)
    expect(await lookups.isHosted('did:plc:gone')).toBe(false)
    expect(await lookups.isHosted('did:plc:nobody')).toBe(false)
    await expect(lookups.isHosted('did:plc:broken')).rejects.toThrow(/answered 500/)
  })

  it('gives DID documents, failing for a DID that does not resolve', async () => {
    const doc = await lookups.ensureResolve('did:plc:gone')
    expect(doc.id).toBe('did:plc:gone')
    expect(doc.alsoKnownAs).toEqual(['at://gone.test'])
    await expect(lookups.ensureResolve('did:plc:nobody')).rejects.toThrow(/nobody/)
  })

  it("gives a DID's signing key from the document the handle checks use", async () => {
    expect(await lookups.signingKey('did:plc:signer', false)).toBe(`did:key:${SIGNER_KEY}`)
    // One document for both: the handle check after the key asks the network nothing new.
    const before = asked.filter((p) => p === '/did:plc:signer').length
    await lookups.resolveHandle('did:plc:signer', false)
    expect(asked.filter((p) => p === '/did:plc:signer').length).toBe(before)
    expect(await lookups.signingKey('did:plc:alice', false)).toBeNull()
    expect(await lookups.signingKey('did:plc:nobody', false)).toBeNull()
  })

  it('warms handles in the background, handed over in bulk, so a later lookup asks nothing', async () => {
    lookups.warm(['did:plc:carol', 'did:plc:dave', 'did:plc:nobody'])
    const warmed = () =>
      ['/did:plc:carol', '/did:plc:dave', '/did:plc:nobody'].every((p) =>
        asked.map(decodeURIComponent).includes(p),
      )
    for (let i = 0; i < 200 && !warmed(); i++) await new Promise((r) => setTimeout(r, 10))
    expect(warmed()).toBe(true)
    // Let the warm lookups finish (their answers are cached when they do).
    await new Promise((r) => setTimeout(r, 100))
    const before = asked.length
    expect(await lookups.resolveHandle('did:plc:carol', false)).toBe('carol.test')
    expect(await lookups.resolveHandle('did:plc:dave', false)).toBe('dave.test')
    expect(asked.length).toBe(before)
  })

  it('refuses lookups once stopped', async () => {
    const own = lookupThread({ identity: { plcUrl: 'http://127.0.0.1:9' } })
    const waiting = expect(own.resolveHandle('did:plc:alice', false)).rejects.toThrow(/stopped/)
    await own.stop()
    await waiting
    await expect(own.isHosted('did:plc:alice')).rejects.toThrow(/stopped/)
  })
})

import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createIdentity } from './identity.ts'

const good = {
  id: 'did:plc:good',
  alsoKnownAs: ['at://good.test'],
  verificationMethod: [
    { id: '#atproto', type: 'Multikey', controller: 'did:plc:good', publicKeyMultibase: 'zQ3s' },
  ],
  service: [{ id: '#atproto_pds', type: 'AtprotoPersonalDataServer', serviceEndpoint: 'http://p' }],
}
const answers: Record<string, [number, string]> = {
  '/did%3Aplc%3Agood': [200, JSON.stringify(good)],
  '/did%3Aplc%3Amissing': [404, '{"message":"DID not registered"}'],
  '/did%3Aplc%3Abroken': [500, 'oops'],
  '/did%3Aplc%3Amalformed': [200, JSON.stringify({ ...good, id: 'did:plc:malformed', service: 5 })],
  '/did%3Aplc%3Aother': [200, JSON.stringify(good)],
  '/did%3Aplc%3Anotjson': [200, '{'],
}

let server: http.Server
let plcUrl = ''
const asked: string[] = []

beforeAll(async () => {
  server = http.createServer((req, res) => {
    asked.push(`${req.url} ${req.headers.accept}`)
    if (req.url === '/did%3Aplc%3Aslow') return void setTimeout(() => res.end('{}'), 1_000)
    const [status, body] = answers[req.url!] ?? [404, '']
    res.writeHead(status, { 'content-type': 'application/json' }).end(body)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  plcUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())))

describe('DID documents from the PLC directory', () => {
  it('reads a document, and asks once while it is cached', async () => {
    const identity = createIdentity({ plcUrl, allowPrivateNetwork: true })
    expect(await identity.resolveDidDoc('did:plc:good')).toEqual(good)
    expect(await identity.resolveDidDoc('did:plc:good')).toEqual(good)
    expect(asked.filter((a) => a.startsWith('/did%3Aplc%3Agood'))).toEqual([
      '/did%3Aplc%3Agood application/did+ld+json,application/json',
    ])
  })

  it('answers null for a DID the directory does not know', async () => {
    const identity = createIdentity({ plcUrl, allowPrivateNetwork: true })
    expect(await identity.resolveDidDoc('did:plc:missing')).toBeNull()
  })

  it('fails, naming the cause, on an error, a malformed or foreign document, and a timeout', async () => {
    const identity = createIdentity({ plcUrl, allowPrivateNetwork: true, timeoutMs: 200 })
    await expect(identity.resolveDidDoc('did:plc:broken')).rejects.toMatchObject({ status: 500 })
    await expect(identity.resolveDidDoc('did:plc:malformed')).rejects.toThrow(/poorly formatted/i)
    // A document for another DID than the one asked for.
    await expect(identity.resolveDidDoc('did:plc:other')).rejects.toThrow(/poorly formatted/i)
    await expect(identity.resolveDidDoc('did:plc:notjson')).rejects.toThrow(SyntaxError)
    await expect(identity.resolveDidDoc('did:plc:slow')).rejects.toThrow(/within 200 ms/)
  })
})

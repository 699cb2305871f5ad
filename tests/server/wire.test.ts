// Every wire the AppView (or an operator with curl) may use reaches the same rpc on one port:
// gRPC over HTTP/1.1 and cleartext HTTP/2, gRPC-web, Connect binary and JSON; and over TLS.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { MethodKind } from '@bufbuild/protobuf'
import { Code, ConnectError, createPromiseClient, type Transport } from '@connectrpc/connect'
import {
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
} from '@connectrpc/connect-node'
import { createPgDb, migrateToLatest, type Db } from '@openplane/db'
import { createIdentity } from '@openplane/identity'
import { PingRequest, PingResponse, Service } from '@openplane/proto'
import { implementedMethods, startServer, type DataplaneServer } from '@openplane/server'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { dropSchemas } from '../harness/stock-network.ts'

// A method bsky.Service does not have: every rpc is implemented, so this is how to reach the
// Unimplemented answer now.
const UnknownRpc = {
  typeName: Service.typeName,
  methods: {
    noSuchRpc: { name: 'NoSuchRpc', I: PingRequest, O: PingResponse, kind: MethodKind.Unary },
  },
} as const

describe('wire protocols', () => {
  const schema = uniqueName('op_wire')
  let db: Db
  let plain: DataplaneServer
  let tls: DataplaneServer
  let certDir: string

  beforeAll(async () => {
    db = createPgDb({ url: PG_URL, schema })
    await migrateToLatest(db)
    const ctx = { db: db.db, identity: createIdentity({ plcUrl: 'http://127.0.0.1:1' }) }
    plain = await startServer({ host: '127.0.0.1', port: 0, ctx })
    certDir = mkdtempSync(path.join(tmpdir(), 'openplane-tls-'))
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-days',
        '1',
        '-subj',
        '/CN=127.0.0.1',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
        '-keyout',
        path.join(certDir, 'key.pem'),
        '-out',
        path.join(certDir, 'cert.pem'),
      ],
      { stdio: 'ignore' },
    )
    tls = await startServer({
      host: '127.0.0.1',
      port: 0,
      ctx,
      tls: {
        key: readFileSync(path.join(certDir, 'key.pem')),
        cert: readFileSync(path.join(certDir, 'cert.pem')),
      },
    })
  })
  afterAll(async () => {
    await plain?.close()
    await tls?.close()
    await db?.close()
    await dropSchemas([schema])
    rmSync(certDir, { recursive: true, force: true })
  })

  const transports = (): [string, Transport][] => [
    ['gRPC over HTTP/1.1', createGrpcTransport({ baseUrl: plain.url, httpVersion: '1.1' })],
    ['gRPC over h2c', createGrpcTransport({ baseUrl: plain.url, httpVersion: '2' })],
    ['gRPC-web', createGrpcWebTransport({ baseUrl: plain.url, httpVersion: '1.1' })],
    ['Connect binary over h2c', createConnectTransport({ baseUrl: plain.url, httpVersion: '2' })],
    [
      'Connect JSON over HTTP/1.1',
      createConnectTransport({ baseUrl: plain.url, httpVersion: '1.1', useBinaryFormat: false }),
    ],
    [
      'gRPC over TLS (h2)',
      createGrpcTransport({
        baseUrl: tls.url,
        httpVersion: '2',
        nodeOptions: { ca: readFileSync(path.join(certDir, 'cert.pem')) },
      }),
    ],
    [
      'Connect over TLS (HTTP/1.1)',
      createConnectTransport({
        baseUrl: tls.url,
        httpVersion: '1.1',
        nodeOptions: { ca: readFileSync(path.join(certDir, 'cert.pem')) },
      }),
    ],
  ]

  it('answers Ping, errors and Unimplemented alike on every transport', async () => {
    for (const [name, transport] of transports()) {
      const client = createPromiseClient(Service, transport)
      expect(await client.ping({}), name).toBeDefined()
      const empty = await client.getLatestRev({ actorDid: 'did:plc:nobody' })
      expect(empty.rev, name).toBe('')
      const bad = await client
        .getFollowers({ actorDid: 'did:plc:x', cursor: 'garbage' })
        .catch((e) => e)
      expect(ConnectError.from(bad).code, name).toBe(Code.InvalidArgument)
      const un = await createPromiseClient(UnknownRpc, transport)
        .noSuchRpc({})
        .catch((e) => e)
      expect(ConnectError.from(un).code, name).toBe(Code.Unimplemented)
    }
  })

  // Connect answers Unimplemented for any method no route module implements; none may be left.
  it('implements every bsky.Service rpc', () => {
    expect(implementedMethods().sort()).toEqual(Object.keys(Service.methods).sort())
  })

  it('takes a plain JSON POST (curl style)', async () => {
    const res = await fetch(`${plain.url}/bsky.Service/GetTimeline`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ actorDid: 'did:plc:nobody', limit: 10 }),
    })
    expect(res.status).toBe(200)
    expect(await res.json()).toEqual({})
  })

  it('serves /_health and /metrics with per-method rpc latency', async () => {
    const health = await fetch(`${plain.url}/_health`)
    expect(health.status).toBe(200)
    expect(await health.json()).toEqual({ ready: true })
    const metrics = await (await fetch(`${plain.url}/metrics`)).text()
    expect(metrics).toMatch(/openplane_rpc_duration_seconds_count\{method="Ping",code="ok"\} \d+/)
    expect(metrics).toMatch(
      /openplane_rpc_duration_seconds_count\{method="GetFollowers",code="InvalidArgument"\}/,
    )
  })
})

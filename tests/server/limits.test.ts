// Limits at the rpc port: silent connections are closed, the connection cap and the allowed
// networks are enforced at accept, idle connections go, and an oversized body is refused.
import http2 from 'node:http2'
import net from 'node:net'
import { BasicHostList, createDataPlaneClient } from '@atproto/bsky'
import { Code, ConnectError } from '@connectrpc/connect'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createPgDb, migrateToLatest, type Db } from '@openplane/db'
import { createIdentity } from '@openplane/identity'
import { startServer, type ConnectionLimits, type DataplaneServer } from '@openplane/server'
import { registry } from '@openplane/telemetry'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { dropSchemas } from '../harness/stock-network.ts'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Resolves with how long the server took to close the connection (or rejects after `maxMs`). */
function closedWithin(socket: net.Socket, maxMs: number): Promise<number> {
  const t0 = Date.now()
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`still open after ${maxMs} ms`)), maxMs)
    socket.once('close', () => {
      clearTimeout(timer)
      resolve(Date.now() - t0)
    })
    socket.on('error', () => {})
  })
}

async function metric(name: string, labels: Record<string, string>): Promise<number> {
  const m = (await registry.getMetricsAsJSON()).find((x) => x.name === name)
  const v = m?.values.find((x) => Object.entries(labels).every(([k, want]) => x.labels[k] === want))
  return Number(v?.value ?? 0)
}

describe('connection limits', () => {
  const schema = uniqueName('op_limits')
  let db: Db
  const servers: DataplaneServer[] = []

  beforeAll(async () => {
    db = createPgDb({ url: PG_URL, schema, poolSize: 2 })
    await migrateToLatest(db)
  })

  afterAll(async () => {
    for (const s of servers) await s.close()
    await db?.close()
    await dropSchemas([schema])
  })

  async function serve(
    limits: Partial<ConnectionLimits>,
    maxRequestBytes?: number,
    more: { maxListItems?: number; ops?: { host: string; port: number } } = {},
  ) {
    const identity = createIdentity({ plcUrl: 'http://127.0.0.1:1', allowPrivateNetwork: true })
    const server = await startServer({
      host: '127.0.0.1',
      port: 0,
      ctx: { db: db.db, identity },
      limits,
      maxRequestBytes,
      ...more,
    })
    servers.push(server)
    return server
  }

  const connect = (port: number) => net.connect(port, '127.0.0.1')

  it('closes a connection that sends nothing after the first-byte deadline', async () => {
    const server = await serve({ firstByteMs: 300 })
    const before = await metric('openplane_connections_timed_out_total', { phase: 'first_byte' })
    const ms = await closedWithin(connect(server.port), 3000)
    expect(ms).toBeGreaterThanOrEqual(250)
    expect(await metric('openplane_connections_timed_out_total', { phase: 'first_byte' })).toBe(
      before + 1,
    )
  })

  it('closes a connection idle after a request', async () => {
    const server = await serve({ idleMs: 500 })
    const socket = connect(server.port)
    const closed = closedWithin(socket, 5000)
    socket.write('GET /_health HTTP/1.1\r\nhost: x\r\nconnection: keep-alive\r\n\r\n')
    await new Promise((r) => socket.once('data', r))
    expect(await closed).toBeGreaterThanOrEqual(450)
  })

  it('keeps a busy HTTP/2 connection past the idle time, and closes it with a GOAWAY once idle', async () => {
    const server = await serve({ idleMs: 500 })
    const before = await metric('openplane_connections_timed_out_total', { phase: 'idle' })
    const session = http2.connect(`http://127.0.0.1:${server.port}`)
    session.on('error', () => {})
    const closed = new Promise<number>((resolve) =>
      session.once('close', () => resolve(Date.now())),
    )
    let goaway = false
    session.once('goaway', () => (goaway = true))
    const health = () =>
      new Promise<number>((resolve, reject) => {
        const stream = session.request({ ':path': '/_health' })
        stream.once('response', (headers) => resolve(Number(headers[':status'])))
        stream.on('data', () => {})
        stream.once('error', reject)
      })
    // A call every 100 ms for three idle times: the connection carries them all.
    let last = 0
    for (const end = Date.now() + 1500; Date.now() < end; await sleep(100)) {
      expect(await health()).toBe(200)
      last = Date.now()
    }
    expect(session.destroyed).toBe(false)
    // Then silence: closed about one idle time after the last answer, with a GOAWAY first (the
    // server's timer starts as it sends that answer, a little before it arrives here).
    const at = await Promise.race([closed, sleep(5000).then(() => Infinity)])
    expect(at - last).toBeGreaterThanOrEqual(300)
    expect(at - last).toBeLessThan(5000)
    expect(goaway).toBe(true)
    expect(await metric('openplane_connections_timed_out_total', { phase: 'idle' })).toBe(
      before + 1,
    )
  })

  it('refuses connections beyond the cap, and serves again below it', async () => {
    const server = await serve({ maxConnections: 2, firstByteMs: 5000 })
    const held = [connect(server.port), connect(server.port)]
    await Promise.all(held.map((s) => new Promise((r) => s.once('connect', r))))
    await sleep(50)
    const before = await metric('openplane_connections_refused_total', { reason: 'over_cap' })
    expect(await closedWithin(connect(server.port), 1000)).toBeLessThan(1000)
    expect(await metric('openplane_connections_refused_total', { reason: 'over_cap' })).toBe(
      before + 1,
    )
    for (const s of held) s.destroy()
    await sleep(50)
    const res = await fetch(`${server.url}/_health`)
    expect(res.status).toBe(200)
  })

  it('bounds the streams of one HTTP/2 connection: the caller holds further calls back', async () => {
    const server = await serve({ maxStreams: 4 })
    const session = http2.connect(server.url)
    session.on('error', () => {})
    const settings = await new Promise<http2.Settings>((r) => session.once('remoteSettings', r))
    expect(settings.maxConcurrentStreams).toBe(4)
    const call = () =>
      session.request({
        ':method': 'POST',
        ':path': '/bsky.Service/Ping',
        'content-type': 'application/grpc',
        te: 'trailers',
      })
    const emptyMessage = Buffer.from([0, 0, 0, 0, 0])
    const answered = (stream: http2.ClientHttp2Stream) =>
      new Promise<string | undefined>((resolve) => {
        let status: string | undefined
        stream.on('trailers', (h) => (status = String(h['grpc-status'])))
        stream.on('response', (h) => (status ??= h['grpc-status'] as string | undefined))
        stream.resume()
        stream.on('close', () => resolve(status))
      })
    // Four calls whose bodies have not come: the server holds four open streams.
    const held = Array.from({ length: 4 }, call)
    const fifth = call()
    fifth.end(emptyMessage)
    const early = await Promise.race([answered(fifth), sleep(300).then(() => 'not yet')])
    expect(early).toBe('not yet')
    // One held call finishes: the fifth goes out and is answered.
    const first = answered(held[0]!)
    held[0]!.end(emptyMessage)
    expect(await first).toBe('0')
    expect(await answered(fifth)).toBe('0')
    for (const s of held.slice(1)) s.close()
    session.close()
  })

  it('refuses clients outside the allowed networks', async () => {
    const outside = await serve({ allowFrom: ['10.0.0.0/8', 'fd00::/8'] })
    const before = await metric('openplane_connections_refused_total', { reason: 'not_allowed' })
    expect(await closedWithin(connect(outside.port), 1000)).toBeLessThan(1000)
    expect(await metric('openplane_connections_refused_total', { reason: 'not_allowed' })).toBe(
      before + 1,
    )
    const inside = await serve({ allowFrom: ['127.0.0.0/8'] })
    const client = createDataPlaneClient(new BasicHostList([inside.url]), { httpVersion: '2' })
    expect((await client.ping({})).toJson()).toEqual({})
  })

  it('refuses an oversized body as resource_exhausted', async () => {
    const server = await serve({}, 1024 * 1024)
    const client = createDataPlaneClient(new BasicHostList([server.url]), { httpVersion: '2' })
    // 20,000 uris of about 100 bytes: 2 MB, over the 1 MiB this server takes.
    const uris = Array.from(
      { length: 20_000 },
      (_, i) => `at://did:plc:x/app.bsky.feed.post/${i}${'x'.repeat(60)}`,
    )
    const err = await client.getPostRecords({ uris }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    )
    expect(err && Code[err.code]).toBe('ResourceExhausted')
    // The server goes on serving.
    expect((await client.ping({})).toJson()).toEqual({})
  })

  it('refuses lists over the configured limit, naming the field', async () => {
    const server = await serve({}, undefined, { maxListItems: 100 })
    const client = createDataPlaneClient(new BasicHostList([server.url]), { httpVersion: '2' })
    const uris = (n: number) =>
      Array.from({ length: n }, (_, i) => `at://did:plc:x/app.bsky.feed.post/${i}`)
    expect((await client.getPostRecords({ uris: uris(100) })).records).toHaveLength(100)
    const err = await client.getPostRecords({ uris: uris(101) }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    )
    expect(err && [Code[err.code], err.rawMessage]).toEqual([
      'InvalidArgument',
      'uris has 101 items; at most 100 are served in one request',
    ])
  })

  it('moves /metrics and the health endpoints to the ops port', async () => {
    const server = await serve({}, undefined, { ops: { host: '127.0.0.1', port: 0 } })
    expect(server.opsUrl).not.toBe(server.url)
    for (const path of ['/metrics', '/_health', '/_ready', '/_live']) {
      expect((await fetch(`${server.opsUrl}${path}`)).status).toBe(200)
      // Not on the rpc port any more: whoever reaches it cannot read them.
      expect((await fetch(`${server.url}${path}`)).status).toBe(404)
    }
    expect((await fetch(`${server.opsUrl}/bsky.Service/Ping`, { method: 'POST' })).status).toBe(404)
    const client = createDataPlaneClient(new BasicHostList([server.url]), { httpVersion: '2' })
    expect((await client.ping({})).toJson()).toEqual({})
  })
})

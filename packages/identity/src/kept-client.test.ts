import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { KeptClient } from './kept-client.ts'

let server: http.Server
let base: URL
let open = 0
let most = 0
const sockets = new Set<unknown>()

beforeAll(async () => {
  server = http.createServer((req, res) => {
    open++
    most = Math.max(most, open)
    const done = (status: number, body: string) => {
      open--
      res.writeHead(status, { 'content-type': 'text/plain' }).end(body)
    }
    if (req.url === '/slow') return void setTimeout(() => done(200, 'late'), 2_000)
    if (req.url === '/big') return done(200, 'x'.repeat(2_000))
    setTimeout(
      () => done(req.url === '/missing' ? 404 : 200, `${req.headers.host} ${req.headers.accept}`),
      5,
    )
  })
  server.on('connection', (s) => sockets.add(s))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  base = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)
})
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())))

describe('KeptClient', () => {
  it('keeps at most its sockets open to a host, and reuses them', async () => {
    const client = new KeptClient({ sockets: 3 })
    sockets.clear()
    most = 0
    const got = await Promise.all(
      Array.from({ length: 30 }, () =>
        client.get(new URL('/a', base), { headers: { host: 'h.test' } }),
      ),
    )
    expect(got.every((r) => r.status === 200 && r.body.toString().startsWith('h.test'))).toBe(true)
    expect(most).toBeLessThanOrEqual(3)
    expect(sockets.size).toBeLessThanOrEqual(3)
    client.close()
  })

  it('gives up when its signal aborts, and refuses a body over its bound', async () => {
    const client = new KeptClient()
    await expect(
      client.get(new URL('/slow', base), { signal: AbortSignal.timeout(50) }),
    ).rejects.toThrow(/timeout|abort/i)
    await expect(client.get(new URL('/big', base), { maxBytes: 100 })).rejects.toThrow(
      /over 100 bytes/,
    )
    client.close()
  })

  it('gives up past its timeout, whichever of timeout and signal comes first', async () => {
    const client = new KeptClient()
    await expect(client.get(new URL('/slow', base), { timeoutMs: 50 })).rejects.toThrow(
      /did not answer within 50 ms/,
    )
    const caller = new AbortController()
    const asked = client.get(new URL('/slow', base), { timeoutMs: 5_000, signal: caller.signal })
    caller.abort(new Error('caller gave up'))
    await expect(asked).rejects.toThrow(/caller gave up/)
    const fast = await client.get(new URL('/a', base), { timeoutMs: 1_000 })
    expect(fast.status).toBe(200)
    client.close()
  })
})

// Load shedding: while the event loop lags past the bound, new rpcs are refused with
// resource_exhausted on both lanes (the direct GetTimeline and Connect's), counted, and served
// again once the lag is gone. The lag is made here by holding this process's loop in 40 ms slices,
// as a saturated process does between its callbacks.
import http2 from 'node:http2'
import { BasicHostList, createDataPlaneClient } from '@atproto/bsky'
import { Code, ConnectError } from '@connectrpc/connect'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sql } from 'kysely'
import { createPgDb, migrateToLatest, type Db } from '@openplane/db'
import { createIdentity } from '@openplane/identity'
import { startServer, type DataplaneServer } from '@openplane/server'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { dropSchemas } from '../harness/stock-network.ts'

type Client = ReturnType<typeof createDataPlaneClient>

const answer = (call: Promise<unknown>): Promise<string> =>
  call.then(
    () => 'ok',
    (e: unknown) => Code[ConnectError.from(e).code] ?? 'unknown',
  )

/** Holds the event loop in `slice`-ms pieces for `ms`, letting one turn run between them. */
async function busy(ms: number, slice = 40): Promise<void> {
  const end = performance.now() + ms
  while (performance.now() < end) {
    const until = performance.now() + slice
    while (performance.now() < until);
    await new Promise((r) => setImmediate(r))
  }
}

describe('load shedding', () => {
  const schema = uniqueName('op_shed')
  let db: Db
  let server: DataplaneServer
  let h1: Client
  let h2: Client

  beforeAll(async () => {
    db = createPgDb({ url: PG_URL, schema, poolSize: 2 })
    await migrateToLatest(db)
    const identity = createIdentity({ plcUrl: 'http://127.0.0.1:1', allowPrivateNetwork: true })
    server = await startServer({
      host: '127.0.0.1',
      port: 0,
      ctx: { db: db.db, identity },
      shedDelayMs: 20,
    })
    h1 = createDataPlaneClient(new BasicHostList([server.url]), { httpVersion: '1.1' })
    h2 = createDataPlaneClient(new BasicHostList([server.url]), { httpVersion: '2' })
  })

  afterAll(async () => {
    await server?.close()
    await db?.close()
    await dropSchemas([schema])
  })

  const metrics = async () => (await fetch(`${server.url}/metrics`)).text()
  const timeline = (c: Client) => c.getTimeline({ actorDid: 'did:plc:reader', limit: 10 })

  it('refuses rpcs on both lanes while the loop lags, and serves them once it does not', async () => {
    expect(await answer(timeline(h2))).toBe('ok')
    expect(await answer(h1.ping({}))).toBe('ok')

    let during: Promise<string[]> | undefined
    let shedding = ''
    const load = busy(900)
    // Asked once the lag has built up; they are read and answered between the slices.
    setTimeout(() => {
      during = Promise.all([answer(timeline(h2)), answer(h1.ping({}))])
      void metrics().then((m) => (shedding = /^openplane_load_shedding (\d)/m.exec(m)?.[1] ?? ''))
    }, 300)
    await load
    expect(await during).toEqual(['ResourceExhausted', 'ResourceExhausted'])
    expect(shedding).toBe('1')

    await new Promise((r) => setTimeout(r, 300))
    expect(await answer(timeline(h2))).toBe('ok')
    expect(await answer(h1.ping({}))).toBe('ok')
    const after = await metrics()
    expect(after).toMatch(/^openplane_load_shedding 0/m)
    for (const method of ['GetTimeline', 'Ping']) {
      expect(after).toMatch(
        new RegExp(
          `^openplane_rpc_duration_seconds_count\\{method="${method}",code="ResourceExhausted"\\} 1$`,
          'm',
        ),
      )
    }
  })

  /**
   * A server with `bounds`, its one Postgres connection held by a slow statement for 0.8 s: the
   * rpcs admitted meanwhile wait for it, in flight. `play` gets a client, and the statement's end.
   */
  async function whileHeld(
    bounds: { maxDirectInFlight?: number; maxRpcsInFlight?: number },
    play: (c: Client, held: Promise<unknown>, url: string) => Promise<void>,
  ): Promise<string> {
    const slow = createPgDb({ url: PG_URL, schema, poolSize: 1 })
    const bounded = await startServer({
      host: '127.0.0.1',
      port: 0,
      ctx: { db: slow.db, identity: createIdentity({ plcUrl: 'http://127.0.0.1:1' }) },
      ...bounds,
    })
    try {
      const c = createDataPlaneClient(new BasicHostList([bounded.url]), { httpVersion: '2' })
      const held = sql`select pg_sleep(0.8)`.execute(slow.db)
      await new Promise((r) => setTimeout(r, 100))
      await play(c, held, bounded.url)
      return await (await fetch(`${bounded.url}/metrics`)).text()
    } finally {
      await bounded.close()
      await slow.close()
    }
  }
  const followers = (c: Client) => answer(c.getFollowers({ actorDid: 'did:plc:reader', limit: 5 }))

  it('refuses timeline reads past the in-flight bound, and serves them once reads finish', async () => {
    const m = await whileHeld({ maxDirectInFlight: 2 }, async (c, held) => {
      const admitted = [answer(timeline(c)), answer(timeline(c))]
      await new Promise((r) => setTimeout(r, 100))
      expect(await answer(timeline(c))).toBe('ResourceExhausted')
      // Only timeline reads count: other rpcs (waiting on Postgres too) are still taken.
      const other = followers(c)
      await held
      expect(await Promise.all([...admitted, other])).toEqual(['ok', 'ok', 'ok'])
      expect(await answer(timeline(c))).toBe('ok')
    })
    expect(m).toMatch(/^openplane_rpcs_shed_total\{reason="in_flight"\} 1$/m)
  })

  it('refuses any rpc past the bound on rpcs in flight, and serves them once they finish', async () => {
    // Rpcs that wait on the pool do not lag the event loop: only this bound stops their queue.
    const m = await whileHeld({ maxRpcsInFlight: 2 }, async (c, held) => {
      const admitted = [followers(c), answer(timeline(c))]
      await new Promise((r) => setTimeout(r, 100))
      expect(await followers(c)).toBe('ResourceExhausted')
      await held
      expect(await Promise.all(admitted)).toEqual(['ok', 'ok'])
      expect(await followers(c)).toBe('ok')
    })
    expect(m).toMatch(/^openplane_rpcs_shed_total\{reason="rpcs_in_flight"\} 1$/m)
  })

  it('answers a refusal once the request has arrived whole, without resetting the stream', async () => {
    // Why a refusal must not be answered earlier: `whenRead` in packages/server/src/direct.ts.
    await whileHeld({ maxRpcsInFlight: 1 }, async (c, held, url) => {
      const admitted = followers(c)
      await new Promise((r) => setTimeout(r, 50))
      const session = http2.connect(url)
      try {
        const stream = session.request(
          {
            ':method': 'POST',
            ':path': '/bsky.Service/GetFollowers',
            'content-type': 'application/grpc',
            te: 'trailers',
          },
          { endStream: false },
        )
        let answeredEarly = false
        const headers = new Promise<http2.IncomingHttpHeaders>((r) => stream.once('response', r))
        void headers.then(() => (answeredEarly = !stream.writableEnded))
        const closed = new Promise<number>((r) => stream.once('close', () => r(stream.rstCode!)))
        stream.resume()
        // The request's message follows its headers a little later, as over a busy connection.
        await new Promise((r) => setTimeout(r, 100))
        stream.end(Buffer.from([0, 0, 0, 0, 0]))
        expect((await headers)['grpc-status']).toBe(String(Code.ResourceExhausted))
        expect(answeredEarly).toBe(false)
        expect(await closed).toBe(http2.constants.NGHTTP2_NO_ERROR)
      } finally {
        session.close()
      }
      await held
      expect(await admitted).toBe('ok')
    })
  })
})

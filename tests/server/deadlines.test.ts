// Time limits on reads: the caller's deadline (grpc-timeout) is answered when it passes, not when
// the work ends; Postgres cancels a read statement that runs past the statement timeout; a read
// waiting for a pool connection gives up after the connect timeout. A table lock held by another
// connection is what keeps the reads waiting here.
import { BasicHostList, createDataPlaneClient } from '@atproto/bsky'
import { Code, ConnectError } from '@connectrpc/connect'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createPgDb, migrateToLatest, type Db } from '@openplane/db'
import { createIdentity } from '@openplane/identity'
import { GetActorsRequest } from '@openplane/proto'
import { startServer, type DataplaneServer } from '@openplane/server'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { dropSchemas } from '../harness/stock-network.ts'

type Client = ReturnType<typeof createDataPlaneClient>

describe('deadlines and statement timeouts', () => {
  const schema = uniqueName('op_deadline')
  const identity = createIdentity({ plcUrl: 'http://127.0.0.1:1', allowPrivateNetwork: true })
  const opened: { db: Db; server: DataplaneServer }[] = []
  let locker: pg.Client

  beforeAll(async () => {
    const direct = createPgDb({ url: PG_URL, schema, poolSize: 1 })
    await migrateToLatest(direct)
    await direct.close()
    locker = new pg.Client({ connectionString: PG_URL })
    await locker.connect()
  })

  afterAll(async () => {
    await locker?.query('ROLLBACK').catch(() => {})
    await locker?.end()
    for (const o of opened) {
      await o.server.close()
      await o.db.close()
    }
    await dropSchemas([schema])
  })

  async function serve(pool: {
    statementTimeoutMs?: number
    connectTimeoutMs?: number
    size?: number
  }): Promise<Client> {
    const db = createPgDb({
      url: PG_URL,
      schema,
      poolSize: pool.size ?? 2,
      statementTimeoutMs: pool.statementTimeoutMs,
      connectTimeoutMs: pool.connectTimeoutMs,
    })
    const server = await startServer({ host: '127.0.0.1', port: 0, ctx: { db: db.db, identity } })
    opened.push({ db, server })
    return createDataPlaneClient(new BasicHostList([server.url]), { httpVersion: '2' })
  }

  /** Holds an exclusive lock on the actor table until the returned function is called. */
  async function lockActors(): Promise<() => Promise<void>> {
    await locker.query('BEGIN')
    await locker.query(`LOCK TABLE "${schema}".actor IN ACCESS EXCLUSIVE MODE`)
    return async () => {
      await locker.query('ROLLBACK')
    }
  }

  async function outcome(call: Promise<unknown>): Promise<{ code: string; ms: number }> {
    const t0 = performance.now()
    const code = await call.then(
      () => 'ok',
      (e: unknown) => Code[ConnectError.from(e).code],
    )
    return { code, ms: performance.now() - t0 }
  }

  it("answers deadline_exceeded when the caller's deadline passes, while the work still waits", async () => {
    const client = await serve({})
    const server = opened.at(-1)!.server
    const unlock = await lockActors()
    try {
      // A Connect call carrying its deadline in a header, from a caller that keeps waiting: the
      // answer can only come from the server's own deadline.
      const t0 = performance.now()
      const res = await fetch(`${server.url}/bsky.Service/GetActors`, {
        method: 'POST',
        headers: { 'content-type': 'application/proto', 'connect-timeout-ms': '300' },
        body: new GetActorsRequest({ dids: ['did:plc:a'] }).toBinary(),
      })
      const ms = performance.now() - t0
      expect(((await res.json()) as { code: string }).code).toBe('deadline_exceeded')
      // At the deadline, not when the lock goes (it is held until after this check).
      expect(ms).toBeLessThan(2000)
    } finally {
      await unlock()
    }
    // Without a deadline the same read waits for the lock and succeeds.
    const unlock2 = await lockActors()
    const waiting = outcome(client.getActors({ dids: ['did:plc:a'] }))
    await new Promise((r) => setTimeout(r, 300))
    await unlock2()
    expect((await waiting).code).toBe('ok')
  })

  it('cancels a read statement past the statement timeout: deadline_exceeded', async () => {
    const client = await serve({ statementTimeoutMs: 300 })
    const unlock = await lockActors()
    try {
      const r = await outcome(client.getActors({ dids: ['did:plc:a'] }))
      expect(r.code).toBe('DeadlineExceeded')
      expect(r.ms).toBeLessThan(2000)
    } finally {
      await unlock()
    }
    expect((await outcome(client.getActors({ dids: ['did:plc:a'] }))).code).toBe('ok')
  })

  it('a read that cannot get a connection in time answers unavailable', async () => {
    const client = await serve({ size: 1, connectTimeoutMs: 200 })
    const unlock = await lockActors()
    try {
      // The first read holds the pool's only connection, waiting on the lock; the second waits
      // for that connection and gives up. (The first may give up too: an rpc can run several
      // queries at once.)
      const first = outcome(client.getActors({ dids: ['did:plc:a'] }))
      await new Promise((r) => setTimeout(r, 100))
      const second = await outcome(client.getActors({ dids: ['did:plc:b'] }))
      expect(second.code).toBe('Unavailable')
      expect(second.ms).toBeLessThan(2000)
      await unlock()
      await first
      expect((await outcome(client.getActors({ dids: ['did:plc:a'] }))).code).toBe('ok')
    } finally {
      await unlock().catch(() => {})
    }
  })
})

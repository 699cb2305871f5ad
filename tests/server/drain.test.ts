// A stop drains: the port stops accepting, a request in flight finishes, then the server closes
// (bounded: what is still running after the drain time is cut).
import net from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createPgDb, migrateToLatest, type Db } from '@openplane/db'
import { createIdentity } from '@openplane/identity'
import { startServer } from '@openplane/server'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { dropSchemas } from '../harness/stock-network.ts'

describe('stopping the server', () => {
  const schema = uniqueName('op_drain')
  let db: Db

  beforeAll(async () => {
    db = createPgDb({ url: PG_URL, schema, poolSize: 2 })
    await migrateToLatest(db)
  })

  afterAll(async () => {
    await db?.close()
    await dropSchemas([schema])
  })

  /** A server whose /_wait takes `ms` to answer: a request that is in flight for that long. */
  const slowServer = (ms: number) =>
    startServer({
      host: '127.0.0.1',
      port: 0,
      ctx: { db: db.db, identity: createIdentity({ plcUrl: 'http://127.0.0.1:1' }) },
      control: { waitFor: () => new Promise((r) => setTimeout(r, ms)) },
    })

  const refused = (port: number) =>
    new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1')
      s.once('connect', () => (s.destroy(), resolve(false)))
      s.once('error', () => resolve(true))
    })

  it('lets a request in flight finish, refusing new connections meanwhile', async () => {
    const server = await slowServer(700)
    const t0 = Date.now()
    const inFlight = fetch(`${server.url}/_wait?seq=1`)
    await new Promise((r) => setTimeout(r, 100))
    const closing = server.close(5000)
    await new Promise((r) => setTimeout(r, 50))
    expect(await refused(server.port)).toBe(true)
    const res = await inFlight
    expect(res.status).toBe(200)
    await closing
    expect(Date.now() - t0).toBeGreaterThanOrEqual(650)
  })

  it('cuts what is still running once the drain time is over', async () => {
    const server = await slowServer(60_000)
    const inFlight = fetch(`${server.url}/_wait?seq=1`).then(
      (r) => r.status,
      () => 'cut',
    )
    await new Promise((r) => setTimeout(r, 100))
    const t0 = Date.now()
    await server.close(300)
    expect(Date.now() - t0).toBeLessThan(2000)
    expect(await inFlight).toBe('cut')
  })
})

// What a caller gets when something goes wrong: its own mistakes answer invalid_argument naming
// the field, Postgres down answers unavailable, and nothing of the driver (hosts, ports, SQL)
// reaches it.
import { BasicHostList, createDataPlaneClient } from '@atproto/bsky'
import { Code, ConnectError } from '@connectrpc/connect'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createPgDb, migrateToLatest, type Db } from '@openplane/db'
import { createIdentity } from '@openplane/identity'
import { startServer, type DataplaneServer } from '@openplane/server'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { startPgCutProxy, type PgCutProxy } from '../harness/pg-cut-proxy.ts'
import { dropSchemas } from '../harness/stock-network.ts'

type Client = ReturnType<typeof createDataPlaneClient>

describe('errors at the rpc edge', () => {
  const schema = uniqueName('op_errors')
  let proxy: PgCutProxy
  let db: Db
  let server: DataplaneServer
  let client: Client

  beforeAll(async () => {
    const direct = createPgDb({ url: PG_URL, schema, poolSize: 1 })
    await migrateToLatest(direct)
    await direct.close()
    proxy = await startPgCutProxy(PG_URL)
    db = createPgDb({ url: proxy.url, schema, poolSize: 4, onPoolError: () => {} })
    const identity = createIdentity({ plcUrl: 'http://127.0.0.1:1', allowPrivateNetwork: true })
    server = await startServer({ host: '127.0.0.1', port: 0, ctx: { db: db.db, identity } })
    client = createDataPlaneClient(new BasicHostList([server.url]), { httpVersion: '2' })
  })

  afterAll(async () => {
    await server?.close()
    await db?.close()
    await proxy?.close()
    await dropSchemas([schema])
  })

  /** The refusal's code and message; the message never shows internals. */
  async function refusal(call: Promise<unknown>): Promise<{ code: string; message: string }> {
    const err = await call.then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    )
    if (!err) throw new Error('expected the call to be refused')
    expect(err.rawMessage).not.toMatch(/127\.0\.0\.1|:\d{4,5}\b|select |insert |postgres|pg_/i)
    return { code: Code[err.code], message: err.rawMessage }
  }

  it('answers invalid_argument, naming the field, for values Postgres cannot take', async () => {
    expect(await refusal(client.getActors({ dids: ['did:plc:a\u0000b'] }))).toEqual({
      code: 'InvalidArgument',
      message: 'dids contains a NUL character',
    })
    expect(await refusal(client.searchPosts({ term: 'a\u0000b', limit: 10 }))).toEqual({
      code: 'InvalidArgument',
      message: 'term contains a NUL character',
    })
    const uris = Array.from({ length: 100_000 }, (_, i) => `at://did:plc:x/app.bsky.feed.post/${i}`)
    const big = await refusal(client.getPostRecords({ uris }))
    expect(big.code).toBe('InvalidArgument')
    expect(big.message).toMatch(/^uris has 100000 items; at most \d+/)
  })

  it('answers invalid_argument for ids that are not DIDs where a DID is needed', async () => {
    expect((await refusal(client.getTimeline({ actorDid: 'not a did', limit: 10 }))).code).toBe(
      'InvalidArgument',
    )
    expect((await refusal(client.getIdentityByDid({ did: 'did:web:%%%' }))).code).toBe(
      'InvalidArgument',
    )
  })

  it('serves long lists up to the limit', async () => {
    const uris = Array.from({ length: 20_000 }, (_, i) => `at://did:plc:x/app.bsky.feed.post/${i}`)
    const res = await client.getPostRecords({ uris })
    expect(res.records).toHaveLength(20_000)
  })

  it('answers unavailable while Postgres is down, and serves again once it is back', async () => {
    proxy.down()
    try {
      expect(
        (await refusal(client.getActors({ dids: ['did:plc:aaaaaaaaaaaaaaaaaaaaaaaa'] }))).code,
      ).toBe('Unavailable')
    } finally {
      proxy.up()
    }
    const res = await client.getActors({ dids: ['did:plc:aaaaaaaaaaaaaaaaaaaaaaaa'] })
    expect(res.actors).toHaveLength(1)
  })
})

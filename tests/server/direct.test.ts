// The direct lane (GetTimeline answered off the HTTP/2 request, without Connect) answers what
// Connect answers: the same pages, cursors, errors, deadline and metrics. HTTP/1.1 requests still
// go through Connect, so one server answers each request both ways and the two are compared.
import http2 from 'node:http2'
import { BasicHostList, createDataPlaneClient } from '@atproto/bsky'
import { Code, ConnectError } from '@connectrpc/connect'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createPgDb, migrateToLatest, type Db } from '@openplane/db'
import { createIdentity } from '@openplane/identity'
import { GetTimelineRequest, GetTimelineResponse } from '@openplane/proto'
import { startServer, type DataplaneServer } from '@openplane/server'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { freePort } from '../harness/processes.ts'
import { dropSchemas } from '../harness/stock-network.ts'

type Client = ReturnType<typeof createDataPlaneClient>

const did = (n: number) => `did:plc:${String(n).padStart(24, 'a')}`

describe('the direct lane', () => {
  const schema = uniqueName('op_direct')
  let db: Db
  let server: DataplaneServer
  let h1: Client
  let h2: Client
  let locker: pg.Client

  beforeAll(async () => {
    db = createPgDb({ url: PG_URL, schema, poolSize: 2 })
    await migrateToLatest(db)
    // Reader 0 follows 1..5; each posts 30 times, some reposted; the reader posts too.
    const client = new pg.Client({ connectionString: PG_URL })
    await client.connect()
    try {
      await client.query(`set search_path to "${schema}"`)
      for (let n = 1; n <= 5; n++) {
        await client.query(
          `insert into follow (uri, cid, creator, "subjectDid", "createdAt", "indexedAt")
           values ($1, 'bafyfollow', $2, $3, '2025-01-01T00:00:00.000Z', '2025-01-01T00:00:00.000Z')`,
          [`at://${did(0)}/app.bsky.graph.follow/${n}`, did(0), did(n)],
        )
      }
      for (let n = 0; n <= 5; n++) {
        for (let i = 0; i < 30; i++) {
          const post = `at://${did(n)}/app.bsky.feed.post/p${i}`
          const at = new Date(Date.UTC(2025, 0, 2, 0, i, n)).toISOString()
          const repost = i % 7 === 3 ? `at://${did(n)}/app.bsky.feed.repost/r${i}` : undefined
          await client.query(
            `insert into feed_item (uri, cid, type, "postUri", "originatorDid", "sortAt")
             values ($1, $2, $3, $4, $5, $6)`,
            [repost ?? post, `bafy${n}x${i}`, repost ? 'repost' : 'post', post, did(n), at],
          )
        }
      }
    } finally {
      await client.end()
    }
    // A PLC directory that refuses connections (a closed port: fetch will not even try port 1).
    const plcUrl = `http://127.0.0.1:${await freePort()}`
    const identity = createIdentity({ plcUrl, allowPrivateNetwork: true })
    server = await startServer({ host: '127.0.0.1', port: 0, ctx: { db: db.db, identity } })
    h1 = createDataPlaneClient(new BasicHostList([server.url]), { httpVersion: '1.1' })
    h2 = createDataPlaneClient(new BasicHostList([server.url]), { httpVersion: '2' })
    locker = new pg.Client({ connectionString: PG_URL })
    await locker.connect()
  })

  afterAll(async () => {
    await locker?.query('ROLLBACK').catch(() => {})
    await locker?.end()
    await server?.close()
    await db?.close()
    await dropSchemas([schema])
  })

  const metric = async (code: string): Promise<number> => {
    const text = await (await fetch(`${server.url}/metrics`)).text()
    const re = new RegExp(
      `^openplane_rpc_duration_seconds_count\\{method="GetTimeline",code="${code}"\\} (\\d+)`,
      'm',
    )
    return Number(re.exec(text)?.[1] ?? 0)
  }

  it('answers every page as Connect does, walking the timeline at several limits', async () => {
    const before = await metric('ok')
    let pages = 0
    for (const limit of [3, 7, 50, 100]) {
      let cursor = ''
      do {
        const req = { actorDid: did(0), limit, cursor }
        const [direct, connect] = await Promise.all([h2.getTimeline(req), h1.getTimeline(req)])
        expect(direct.toJson()).toEqual(connect.toJson())
        cursor = direct.cursor
        pages++
      } while (cursor)
    }
    expect(pages).toBeGreaterThan(40)
    // Both ways are timed under the method's name.
    expect((await metric('ok')) - before).toBe(2 * pages)
  })

  it('answers the hydration rpcs as Connect does, every one on its own lane', async () => {
    const lanes = async () => {
      const text = await (await fetch(`${server.url}/metrics`)).text()
      const n = (lane: string) =>
        Number(
          new RegExp(`^openplane_rpc_lane_total\\{lane="${lane}"\\} (\\d+)`, 'm').exec(text)?.[1] ??
            0,
        )
      return { direct: n('direct'), connect: n('connect') }
    }
    const outcome = (call: Promise<{ toJson(): unknown }>) =>
      call.then(
        (r) => r.toJson(),
        // Request ids differ per call; the rest must not.
        (e: unknown) =>
          `${Code[ConnectError.from(e).code]}: ${ConnectError.from(e).rawMessage.replace(/request [0-9a-f-]+/, 'request …')}`,
      )
    const dids = [0, 1, 2, 3, 9].map(did)
    const posts = dids.flatMap((d) => [
      `at://${d}/app.bsky.feed.post/p1`,
      `at://${d}/app.bsky.feed.post/p3`,
    ])
    const calls: ((c: Client) => Promise<{ toJson(): unknown }>)[] = [
      (c) => c.getFollowers({ actorDid: did(1), limit: 10 }),
      (c) => c.getFollows({ actorDid: did(0), limit: 3 }),
      (c) => c.getRelationships({ actorDid: did(0), targetDids: dids }),
      (c) => c.getActors({ dids }),
      (c) => c.getPostRecords({ uris: posts }),
      (c) => c.getInteractionCounts({ refs: posts.map((uri) => ({ uri })) }),
      (c) => c.getLabels({ subjects: [...dids, ...posts], issuers: [did(9)] }),
      (c) => c.getAuthorFeed({ actorDid: did(2), limit: 5 }),
      (c) =>
        c.getLikesByActorAndSubjects({ actorDid: did(0), refs: posts.map((uri) => ({ uri })) }),
      (c) => c.getFollowsFollowing({ actorDid: did(0), targetDids: dids }),
      // A caller's mistake, and a dependency away (the PLC directory): the same refusals.
      (c) => c.getFollowers({ actorDid: 'x\u0000', limit: 1 }),
      (c) => c.getIdentityByDid({ did: did(1) }),
    ]
    const before = await lanes()
    for (const call of calls) {
      const [direct, connect] = await Promise.all([outcome(call(h2)), outcome(call(h1))])
      expect(direct).toEqual(connect)
      expect(String(direct)).not.toMatch(/^Internal/)
    }
    const after = await lanes()
    // Every call on each lane (the client retries an unavailable answer, on both alike).
    expect(after.direct - before.direct).toBeGreaterThanOrEqual(calls.length)
    expect(after.direct - before.direct).toBe(after.connect - before.connect)
  })

  it('refuses what Connect refuses, with the same code and message', async () => {
    const answer = (c: Client, actorDid: string) =>
      c.getTimeline({ actorDid, limit: 10 }).then(
        () => 'ok',
        (e: unknown) => {
          const err = ConnectError.from(e)
          return `${Code[err.code]}: ${err.rawMessage}`
        },
      )
    for (const actorDid of ['', 'alice', 'did:plc:x\u0000y']) {
      const [direct, connect] = await Promise.all([answer(h2, actorDid), answer(h1, actorDid)])
      expect(direct).not.toBe('ok')
      expect(direct).toBe(connect)
    }
  })

  it("answers deadline_exceeded when the caller's deadline passes", async () => {
    await locker.query('BEGIN')
    await locker.query(`LOCK TABLE "${schema}".feed_item IN ACCESS EXCLUSIVE MODE`)
    try {
      const t0 = performance.now()
      const err = await h2
        .getTimeline({ actorDid: did(0), limit: 10 }, { timeoutMs: 300 })
        .then(() => undefined, ConnectError.from)
      expect(err?.code).toBe(Code.DeadlineExceeded)
      expect(performance.now() - t0).toBeLessThan(3000)
      // The server's own answer: a caller that sends grpc-timeout but keeps no timer of its own
      // (the client above races the server to the deadline and may cancel first).
      const before = await metric('DeadlineExceeded')
      const session = http2.connect(server.url)
      try {
        const status = await new Promise<string>((resolve, reject) => {
          const head = Buffer.alloc(5)
          const msg = new GetTimelineRequest({ actorDid: did(0), limit: 10 }).toBinary()
          head.writeUInt32BE(msg.length, 1)
          const stream = session.request({
            ':method': 'POST',
            ':path': '/bsky.Service/GetTimeline',
            'content-type': 'application/grpc',
            'grpc-timeout': '300m',
            te: 'trailers',
          })
          stream.on('response', (h) => resolve(String(h['grpc-status'] ?? '')))
          stream.on('error', reject)
          stream.resume()
          stream.end(Buffer.concat([head, msg]))
        })
        expect(status).toBe(String(Code.DeadlineExceeded))
      } finally {
        session.close()
      }
      expect((await metric('DeadlineExceeded')) - before).toBe(1)
    } finally {
      await locker.query('ROLLBACK')
    }
  })

  it('answers malformed requests invalid_argument, and leaves other wires to Connect', async () => {
    const session = http2.connect(server.url)
    try {
      const call = (body: Buffer, contentType = 'application/grpc') =>
        new Promise<{ status: string; message: string; data: Buffer }>((resolve, reject) => {
          const stream = session.request({
            ':method': 'POST',
            ':path': '/bsky.Service/GetTimeline',
            'content-type': contentType,
            te: 'trailers',
          })
          const chunks: Buffer[] = []
          let status = ''
          let message = ''
          stream.on('response', (h) => {
            status = String(h['grpc-status'] ?? '')
            message = decodeURIComponent(String(h['grpc-message'] ?? ''))
          })
          stream.on('trailers', (t) => {
            status = String(t['grpc-status'] ?? status)
            message = decodeURIComponent(String(t['grpc-message'] ?? message))
          })
          stream.on('data', (c: Buffer) => chunks.push(c))
          stream.on('end', () => resolve({ status, message, data: Buffer.concat(chunks) }))
          stream.on('error', reject)
          stream.end(body)
        })
      const envelope = (msg: Uint8Array, flag = 0) => {
        const head = Buffer.alloc(5)
        head[0] = flag
        head.writeUInt32BE(msg.length, 1)
        return Buffer.concat([head, msg])
      }
      const good = new GetTimelineRequest({ actorDid: did(0), limit: 3 }).toBinary()
      const ok = await call(envelope(good))
      expect(ok.status).toBe('0')
      expect(GetTimelineResponse.fromBinary(ok.data.subarray(5)).items).toHaveLength(3)
      // Not protobuf, a cut envelope, two messages, a compressed flag: each invalid_argument.
      for (const [body, said] of [
        [envelope(Buffer.from([0xff, 0xff, 0xff])), 'failed to decode the request'],
        [envelope(good).subarray(0, 8), 'expected exactly one request message'],
        [Buffer.concat([envelope(good), envelope(good)]), 'expected exactly one request message'],
        [envelope(good, 1), 'compressed messages are not accepted'],
        [Buffer.alloc(0), 'missing request message'],
      ] as const) {
        const bad = await call(body)
        expect(bad.status, bad.message).toBe(String(Code.InvalidArgument))
        expect(bad.message).toContain(said)
        expect(bad.data.length).toBe(0)
      }
      // gRPC-web on HTTP/2 is Connect's to answer, and it does.
      const web = await call(envelope(good), 'application/grpc-web+proto')
      expect(web.data.length).toBeGreaterThan(5)
    } finally {
      session.close()
    }
  })
})

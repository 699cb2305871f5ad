// `/subscribe` served from a published-event log written here directly (as the writer would):
// replay from a cursor then live without a gap or a duplicate, the same bytes compressed and not,
// filters and options updates, a start cursor older than the log, and consumers that stop
// reading (closed with the reason, the others unaffected) or fall behind the retained window.
import net from 'node:net'
import {
  appendPublished,
  createPgDb,
  migrateToLatest,
  trimPublished,
  type Db,
  type PublishedEvent,
} from '@openplane/db'
import { messageText } from '@openplane/jetstream'
import { startSubscribe, type SubscribeServer } from '@openplane/subscribe'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import WebSocket from 'ws'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { dropSchemas } from '../harness/stock-network.ts'

const schema = uniqueName('op_subscribe')
let db: Db
let server: SubscribeServer
/** Cursors written so far, counting up from a fixed past. */
let clock = 1_700_000_000_000_000
const written: PublishedEvent[] = []

const dids = ['did:plc:alice', 'did:plc:bob']
const collections = ['app.bsky.feed.post', 'app.bsky.feed.like', 'app.bsky.graph.follow']

/** Appends `n` messages (each `pad` bytes of text or so), as one committed batch. */
async function publish(n: number, pad = 0): Promise<PublishedEvent[]> {
  const batch: PublishedEvent[] = []
  for (let i = 0; i < n; i++) {
    const timeUs = ++clock
    const did = dids[written.length % 2]!
    const identity = written.length % 10 === 9
    const collection = identity ? null : collections[written.length % 3]!
    const message = identity
      ? JSON.stringify({
          did,
          time_us: timeUs,
          kind: 'identity',
          identity: { did, handle: 'a.test', seq: written.length, time: '2024-01-01T00:00:00Z' },
        })
      : JSON.stringify({
          did,
          time_us: timeUs,
          kind: 'commit',
          commit: {
            rev: '3l3qo2vutsw2b',
            operation: 'create',
            collection,
            rkey: `r${written.length}`,
            record: { $type: collection, text: 'x'.repeat(pad) },
            cid: 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm',
          },
        })
    const e = { timeUs, did, collection, message }
    batch.push(e)
    written.push(e)
  }
  await appendPublished(db.db, batch)
  return batch
}

interface Received {
  texts: string[]
  closed: Promise<{ code: number; reason: string }>
  ws: WebSocket
}

function connect(query: string): Received {
  const ws = new WebSocket(`${server.url}/subscribe?${query}`)
  const texts: string[] = []
  ws.on('message', (data: Buffer) => texts.push(messageText(new Uint8Array(data))))
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })),
  )
  return { texts, closed, ws }
}

async function until(check: () => boolean, what: string, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

beforeAll(async () => {
  db = createPgDb({ url: PG_URL, schema, poolSize: 4 })
  await migrateToLatest(db)
  await publish(500)
  server = await startSubscribe(db.db, {
    host: '127.0.0.1',
    port: 0,
    // Small, so that replays reach past memory into Postgres pages.
    memoryBytes: 64 * 1024,
    stallMs: 1500,
    maxConsumers: 100,
    pollMs: 10,
  })
})

afterAll(async () => {
  await server?.close()
  await db?.close()
  await dropSchemas([schema])
})

describe('/subscribe', () => {
  it('replays from a cursor, then goes on live without a gap or a duplicate', async () => {
    const from = written[100]!
    const c = connect(`cursor=${from.timeUs}`)
    await until(() => c.texts.length === 400, 'the replay')
    // Live messages land while it reads.
    const later = [...(await publish(300)), ...(await publish(200))]
    await until(() => c.texts.length === 900, 'the live messages')
    const expected = [...written.slice(100, 500), ...later].map((e) => e.message)
    expect(c.texts).toEqual(expected)
    c.ws.close()
  })

  it('sends the same messages compressed with the dictionary', async () => {
    const plain = connect(`cursor=${written[0]!.timeUs}`)
    const zstd = connect(`cursor=${written[0]!.timeUs}&compress=true`)
    const n = written.length
    await until(() => plain.texts.length === n && zstd.texts.length === n, 'both consumers')
    expect(zstd.texts).toEqual(plain.texts)
    plain.ws.close()
    zstd.ws.close()
  })

  it('filters by collection (prefixes too) and DID, and takes options updates', async () => {
    const c = connect(
      `cursor=${written[0]!.timeUs}&wantedCollections=app.bsky.graph.*&wantedDids=${dids[0]}`,
    )
    const expected = written.filter(
      (e) =>
        e.did === dids[0] && (e.collection === null || e.collection.startsWith('app.bsky.graph')),
    )
    await until(() => c.texts.length === expected.length, 'the filtered replay')
    expect(c.texts).toEqual(expected.map((e) => e.message))
    // From here on only likes, of anyone.
    c.ws.send(
      JSON.stringify({
        type: 'options_update',
        payload: { wantedCollections: ['app.bsky.feed.like'] },
      }),
    )
    await new Promise((r) => setTimeout(r, 200))
    const next = await publish(30)
    const likes = next.filter((e) => e.collection === 'app.bsky.feed.like' || e.collection === null)
    await until(() => c.texts.length === expected.length + likes.length, 'the updated filter')
    expect(c.texts.slice(expected.length)).toEqual(likes.map((e) => e.message))
    c.ws.close()
  })

  it('leaves out messages larger than maxMessageSizeBytes', async () => {
    const sizes = written.map((e) => Buffer.byteLength(e.message))
    const limit = [...sizes].sort((a, b) => a - b)[Math.floor(sizes.length / 2)]!
    const c = connect(`cursor=${written[0]!.timeUs}&maxMessageSizeBytes=${limit}`)
    const expected = written.filter((_, i) => sizes[i]! <= limit)
    expect(expected.length).toBeLessThan(written.length)
    await until(() => c.texts.length === expected.length, 'the messages within the limit')
    expect(c.texts).toEqual(expected.map((e) => e.message))
    c.ws.close()
  })

  it('waits for the options update when asked to (requireHello)', async () => {
    const c = connect(`cursor=${written[0]!.timeUs}&requireHello=true`)
    await new Promise((r) => c.ws.on('open', r))
    await new Promise((r) => setTimeout(r, 300))
    expect(c.texts).toEqual([])
    c.ws.send(JSON.stringify({ type: 'options_update', payload: { wantedDids: [dids[1]] } }))
    const expected = written.filter((e) => e.did === dids[1])
    await until(() => c.texts.length === expected.length, 'the replay after hello')
    c.ws.close()
  })

  it('serves consumers that arrive together while the tail rests, with nothing new to wake them', async () => {
    await until(() => server.consumers() === 0, 'the earlier consumers to go')
    const n = written.length
    const together = [1, 2, 3].map(() => connect(`cursor=${written[0]!.timeUs}`))
    await until(() => together.every((c) => c.texts.length === n), 'every consumer')
    for (const c of together) c.ws.close()
  })

  it('refuses a bad request before upgrading', async () => {
    for (const q of ['cursor=abc', 'wantedCollections=not%20an%20nsid', 'wantedDids=bob']) {
      const ws = new WebSocket(`${server.url}/subscribe?${q}`)
      const status = await new Promise<number>((resolve) =>
        ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0)),
      )
      expect(status, q).toBe(400)
    }
  })

  it('closes a consumer that stops reading, and the others go on', async () => {
    // 2 KB messages, enough to fill the socket's buffers on both sides.
    await publish(8000, 2000)
    const url = new URL(server.url)
    const stuck = net.connect(Number(url.port), url.hostname)
    await new Promise((r) => stuck.once('connect', r))
    stuck.write(
      `GET /subscribe?cursor=${written[0]!.timeUs} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n` +
        'Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
    )
    stuck.pause()
    const ended = new Promise<void>((resolve) => stuck.once('close', () => resolve()))
    const reader = connect(`cursor=${written[0]!.timeUs}`)
    const n = written.length
    await until(() => reader.texts.length === n, 'the reading consumer')
    // Nothing read for the stall limit: closed (destroyed after the close frame's grace).
    const before = server.consumers()
    await until(() => server.consumers() === before - 1, 'the stalled consumer to be closed')
    stuck.destroy()
    await ended
    // The reader still gets live messages.
    const more = await publish(10)
    await until(() => reader.texts.length === n + more.length, 'live messages after the close')
    reader.ws.close()
  })

  it('starts a cursor older than the log at its oldest message; drops one left behind a trim', async () => {
    // The first 200 go out of the window.
    await trimPublished(db.db, written[200]!.timeUs, 10_000)
    const early = connect('cursor=1')
    await until(() => early.texts.length === written.length - 200, 'the clamped replay')
    expect(early.texts[0]).toBe(written[200]!.message)
    early.ws.close()

    // A consumer paused after its first page, past which the log is then trimmed.
    const paused = connect(`cursor=${written[200]!.timeUs}`)
    await until(() => paused.texts.length > 0, 'the first messages')
    paused.ws.pause()
    await trimPublished(db.db, written[written.length - 50]!.timeUs, 100_000)
    paused.ws.resume()
    const { code, reason } = await paused.closed
    expect(code).toBe(1008)
    expect(reason).toMatch(/behind the retained window/)
  })
})

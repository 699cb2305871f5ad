// `/subscribe` on a running dataplane indexing a real PDS's firehose, read by the Jetstream client
// a feed generator would use (@atcute/jetstream): exactly the records, identity and account events
// the dataplane committed, in the firehose's order, filtered as asked, across a restart of the
// dataplane and the client's reconnect from its cursor; compressed and not; a community deployment
// publishes its members' events only; a consumer that reads nothing does not hold up indexing.
import net from 'node:net'
import { decodeAll } from '@atproto/lex-cbor'
import { TestNetworkNoAppView } from '@atproto/dev-env'
import { JetstreamSubscription } from '@atcute/jetstream'
import { messageText } from '@openplane/jetstream'
import { pluginFor } from '@openplane/plugins'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import WebSocket from 'ws'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { freePort, spawnDataplane, waitForSeq, type Child } from '../harness/processes.ts'
import { createUser, type Did } from '../harness/seed.ts'
import { dropSchemas } from '../harness/stock-network.ts'

/** What a message is about, comparable between the firehose and the stream. */
type Item =
  | {
      kind: 'commit'
      did: string
      operation: string
      collection: string
      rkey: string
      cid?: string
    }
  | { kind: 'identity' | 'account'; did: string }

interface Message {
  did: string
  time_us: number
  kind: string
  commit?: { operation: string; collection: string; rkey: string; cid?: string; record?: unknown }
}

function itemOf(m: Message): Item {
  if (m.kind !== 'commit') return { kind: m.kind as 'identity' | 'account', did: m.did }
  const c = m.commit!
  const item: Item = {
    kind: 'commit',
    did: m.did,
    operation: c.operation,
    collection: c.collection,
    rkey: c.rkey,
  }
  if (c.cid !== undefined) item.cid = c.cid
  return item
}

/** The PDS firehose from the start up to `head`, as the stream should publish it. */
async function firehoseItems(pdsUrl: string, head: number): Promise<Item[]> {
  const ws = new WebSocket(
    `${pdsUrl.replace(/^http/, 'ws')}/xrpc/com.atproto.sync.subscribeRepos?cursor=0`,
  )
  const items: Item[] = []
  await new Promise<void>((resolve, reject) => {
    ws.on('message', (data: Buffer) => {
      const [header, body] = [...decodeAll(new Uint8Array(data))] as [
        { t: string },
        {
          seq: number
          repo?: string
          did?: string
          ops?: { action: string; path: string; cid: { toString(): string } | null }[]
        },
      ]
      if (header.t === '#commit') {
        for (const op of body.ops ?? []) {
          const [collection, rkey] = op.path.split('/') as [string, string]
          if (!pluginFor(collection)) continue
          const item: Item = {
            kind: 'commit',
            did: body.repo!,
            operation: op.action,
            collection,
            rkey,
          }
          if (op.cid) item.cid = op.cid.toString()
          items.push(item)
        }
      } else if (header.t === '#identity' || header.t === '#account') {
        items.push({ kind: header.t.slice(1) as 'identity' | 'account', did: body.did! })
      }
      if (body.seq >= head) resolve()
    })
    ws.on('error', reject)
  })
  ws.close()
  return items
}

/** Collects a raw WebSocket consumer's messages as text. */
function rawConsumer(url: string): { texts: string[]; ws: WebSocket } {
  const ws = new WebSocket(url)
  const texts: string[] = []
  ws.on('message', (data: Buffer) => texts.push(messageText(new Uint8Array(data))))
  return { texts, ws }
}

/** Reads an @atcute/jetstream subscription in the background, keeping each event once. */
function atcuteConsumer(opts: ConstructorParameters<typeof JetstreamSubscription>[0]) {
  /** What the client saw of its connections and of events it refused, for a failure's message. */
  const seen: string[] = []
  const sub = new JetstreamSubscription({
    ...opts,
    onConnectionOpen: () => seen.push('open'),
    onConnectionClose: (e) => seen.push(`close ${e.code} ${e.reason}`),
    onConnectionError: () => seen.push('error'),
    onError: (err) => seen.push(`invalid ${String(err)}`.slice(0, 300)),
  })
  const got: Message[] = []
  let last = 0
  let stopped = false
  const done = (async () => {
    for await (const evt of sub) {
      // A reconnect resumes at its cursor, which Jetstream sends again: seen already.
      if (evt.time_us > last) {
        last = evt.time_us
        got.push(evt as unknown as Message)
      }
      if (stopped) break
    }
  })()
  return {
    got,
    seen,
    async stop() {
      stopped = true
      // The iterator ends at its next event; close by leaving it.
      await Promise.race([done, new Promise((r) => setTimeout(r, 100))])
    },
  }
}

async function until(check: () => boolean, what: string, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

describe('/subscribe on a dataplane indexing a PDS', () => {
  let network: TestNetworkNoAppView
  let sc: ReturnType<TestNetworkNoAppView['getSeedClient']>
  const schema = uniqueName('op_stream')
  const communitySchema = uniqueName('op_stream_community')
  const children: Child[] = []
  let dataplane: Child
  let rpcPort = 0
  let streamPort = 0
  const u = {} as Record<'alice' | 'bob' | 'carol', Did>
  const posts: { uri: string; cid: string }[] = []

  const start = async () => {
    const child = await spawnDataplane({
      pgUrl: PG_URL,
      schema,
      plcUrl: network.plc.url,
      pdsUrl: network.pds.url,
      port: rpcPort,
      extra: {
        DATAPLANE_FIREHOSE_CURSOR: '0',
        DATAPLANE_SUBSCRIBE_PORT: String(streamPort),
        DATAPLANE_SUBSCRIBE_WINDOW_MINUTES: '60',
        DATAPLANE_SUBSCRIBE_POLL_MS: '10',
      },
    })
    children.push(child)
    return child
  }
  const head = async () => (await network.pds.ctx.sequencer.curr()) ?? 0
  const caughtUp = async (child: Child) => {
    const seq = await head()
    await waitForSeq(child.url, seq)
    return seq
  }
  const streamUrl = () => `ws://127.0.0.1:${streamPort}`

  /** Some of everything: posts, a reply, likes, a repost, a follow, a profile and its update, deletes. */
  async function activity(round: number) {
    const { alice, bob, carol } = u
    const a = await sc.post(alice, `round ${round}: hello`)
    const b = await sc.post(bob, `round ${round}: bob here`)
    posts.push({ uri: a.ref.uriStr, cid: a.ref.cidStr })
    await sc.reply(carol, a.ref, a.ref, `round ${round}: a reply`)
    const like = await sc.like(bob, a.ref)
    await sc.like(carol, b.ref)
    await sc.repost(carol, a.ref)
    if (round === 0) {
      await sc.follow(carol, alice)
      await sc.agent.app.bsky.actor.profile.create(
        { repo: alice },
        { displayName: 'Alice' },
        sc.getHeaders(alice),
      )
    } else {
      await sc.agent.com.atproto.repo.putRecord(
        {
          repo: alice,
          collection: 'app.bsky.actor.profile',
          rkey: 'self',
          record: { $type: 'app.bsky.actor.profile', displayName: `Alice ${round}` },
        },
        { headers: sc.getHeaders(alice), encoding: 'application/json' },
      )
    }
    const rkey = like.rkey
    await sc.agent.com.atproto.repo.deleteRecord(
      { repo: bob, collection: 'app.bsky.feed.like', rkey },
      { headers: sc.getHeaders(bob), encoding: 'application/json' },
    )
  }

  beforeAll(async () => {
    network = await TestNetworkNoAppView.create({})
    sc = network.getSeedClient()
    const seeds = sc as unknown as Parameters<typeof createUser>[0]
    for (const name of ['alice', 'bob', 'carol'] as const) u[name] = await createUser(seeds, name)
    await activity(0)
    rpcPort = await freePort()
    streamPort = await freePort()
    dataplane = await start()
    await caughtUp(dataplane)
  })

  afterAll(async () => {
    for (const c of children) await c.stop()
    await network?.close()
    await dropSchemas([schema, communitySchema])
  })

  it('gives a Jetstream client every committed event in order, filtered as asked, across a kill and restart', async () => {
    const all = atcuteConsumer({ url: streamUrl(), cursor: 0 })
    const filtered = atcuteConsumer({
      url: streamUrl(),
      cursor: 0,
      wantedCollections: ['app.bsky.feed.*'],
      wantedDids: [u.alice, u.carol],
    })
    const before = await firehoseItems(network.pds.url, await head())
    await until(() => all.got.length >= before.length, 'the replay').catch((err: Error) => {
      throw new Error(
        `${err.message}: ${all.got.length} of ${before.length}; client: ${all.seen.join('; ')}\n` +
          dataplane.output().slice(-4000),
      )
    })

    // Live; then the dataplane is killed while it indexes, more is written while it is down,
    // and it starts again.
    await activity(1)
    await caughtUp(dataplane)
    // Killed, not stopped: what it committed is in the log, and nothing else.
    await activity(2)
    await dataplane.stop('SIGKILL')
    await activity(3)
    dataplane = await start()
    await activity(4)
    const last = await caughtUp(dataplane)
    const expected = await firehoseItems(network.pds.url, last)
    await until(() => all.got.length >= expected.length, 'every event after the restart').catch(
      (err: Error) => {
        // Where the stream parted from the firehose, and what the dataplane said.
        const got = all.got.map(itemOf)
        const at = expected.findIndex((e, i) => JSON.stringify(e) !== JSON.stringify(got[i]))
        throw new Error(
          `${err.message}: ${got.length} of ${expected.length} events, first difference at ${at}: ` +
            `expected ${JSON.stringify(expected[at])}, got ${JSON.stringify(got[at])}\n` +
            `client: ${all.seen.join('; ')}\n` +
            dataplane.output().slice(-4000),
        )
      },
    )
    await new Promise((r) => setTimeout(r, 300))
    expect(all.got.map(itemOf)).toEqual(expected)
    const times = all.got.map((m) => m.time_us)
    expect(times).toEqual([...times].sort((x, y) => x - y))

    const wanted = expected.filter(
      (i) =>
        (i.did === u.alice || i.did === u.carol) &&
        (i.kind !== 'commit' || i.collection.startsWith('app.bsky.feed.')),
    )
    await until(() => filtered.got.length >= wanted.length, 'the filtered events')
    expect(filtered.got.map(itemOf)).toEqual(wanted)

    // Records come as the PDS stored them.
    const post = all.got.find((m) => m.commit?.cid === posts[0]!.cid)!
    expect(post.commit!.record).toMatchObject({
      $type: 'app.bsky.feed.post',
      text: 'round 0: hello',
    })
    await all.stop()
    await filtered.stop()
  })

  it('sends the same messages compressed with the dictionary, and not', async () => {
    const plain = rawConsumer(`${streamUrl()}/subscribe?cursor=0`)
    const zstd = rawConsumer(`${streamUrl()}/subscribe?cursor=0&compress=true`)
    const n = (await firehoseItems(network.pds.url, await head())).length
    await until(() => plain.texts.length >= n && zstd.texts.length >= n, 'both consumers')
    expect(zstd.texts).toEqual(plain.texts)
    plain.ws.close()
    zstd.ws.close()
  })

  it('goes on indexing while a consumer reads nothing', async () => {
    const stuck = net.connect(streamPort, '127.0.0.1')
    await new Promise((r) => stuck.once('connect', r))
    stuck.write(
      'GET /subscribe?cursor=0 HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
        'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
    )
    stuck.pause()
    const live = atcuteConsumer({ url: streamUrl() })
    await new Promise((r) => setTimeout(r, 300))
    await activity(5)
    await caughtUp(dataplane)
    await until(() => live.got.length >= 8, 'live events beside the stuck consumer')
    stuck.destroy()
    await live.stop()
  })

  it('publishes only its members in a community deployment', async () => {
    const port = await freePort()
    const community = await spawnDataplane({
      pgUrl: PG_URL,
      schema: communitySchema,
      plcUrl: network.plc.url,
      pdsUrl: network.pds.url,
      extra: {
        DATAPLANE_FIREHOSE_CURSOR: '0',
        DATAPLANE_COMMUNITY_DIDS: `${u.alice},${u.carol}`,
        DATAPLANE_SUBSCRIBE_PORT: String(port),
        DATAPLANE_SUBSCRIBE_WINDOW_MINUTES: '60',
        DATAPLANE_SUBSCRIBE_POLL_MS: '10',
      },
    })
    children.push(community)
    await caughtUp(community)
    const consumer = rawConsumer(`ws://127.0.0.1:${port}/subscribe?cursor=0`)
    // Live events of the members after it caught up must come; nothing of bob's, ever.
    await activity(6)
    await caughtUp(community)
    const has = (text: string) => consumer.texts.some((t) => t.includes(text))
    await until(() => has('round 6: hello') && has('round 6: a reply'), "the members' live posts")
    const dids = new Set(consumer.texts.map((t) => (JSON.parse(t) as Message).did))
    expect(dids.has(u.bob)).toBe(false)
    expect(dids.has(u.alice)).toBe(true)
    expect(dids.has(u.carol)).toBe(true)
    consumer.ws.close()
  })
})

// The rpcs the stock dataplane leaves out (verification lists, thread mute writes, the new-user
// count, feed generator status). The stock cannot be the reference here, so each answer is
// checked against what the test itself seeded through the PDS (or wrote through our rpcs), and
// thread mute writes are read back through the stock dataplane and the stock AppView too: they
// must be the state bsync's thread mutes leave.
import { Timestamp } from '@bufbuild/protobuf'
import { Code, ConnectError } from '@connectrpc/connect'
import type { SeedClient, TestNetwork } from '@atproto/dev-env'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startOurServer, type OurServer } from '../harness/ours.ts'
import { createUser, seedBasic, setProfile } from '../harness/seed.ts'
import {
  startStockNetwork,
  type DataplaneClient,
  type StockNetwork,
} from '../harness/stock-network.ts'
import type { Did } from './diff.ts'

type Sc = SeedClient<TestNetwork>

const MISSING_DID = 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa'
const LIMITS = [1, 2, 3, 50] as const
// Several verifications share T1, so pages must break sortedAt ties by the other party's did.
const T0 = '2023-06-01T00:00:00.000Z'
const T1 = '2024-01-01T00:00:00.000Z'
const T2 = '2024-02-01T12:00:00.000Z'
// Later than any indexing time: sortedAt is then the indexing time (least of the two).
const FUTURE = '2099-01-01T00:00:00.000Z'

interface Seeded {
  issuer: Did
  subject: Did
  rkey: string
  createdAt: string
}

interface Listed {
  actorDid: string
  subjectDid: string
  rkey: string
  createdAt?: Timestamp
  indexedAt?: Timestamp
  sortedAt?: Timestamp
}

describe('rpcs the stock leaves out', () => {
  let net: StockNetwork
  let sc: Sc
  let ours: OurServer
  let client: DataplaneClient
  let u: Record<string, Did>
  let verifications: Seeded[]
  let seedStart: string
  let seedEnd: string

  beforeAll(async () => {
    net = await startStockNetwork()
    sc = net.sc
    // Profiles made from here on without a createdAt are dated by their indexing; whatever the
    // network made while starting is indexed first, so none of it lands in the window.
    await net.network.processAll()
    seedStart = new Date().toISOString()
    u = await seedBasic(sc)
    for (const name of ['eve', 'fred', 'gina', 'hank', 'ivy']) u[name] = await createUser(sc, name)
    verifications = await seedVerifications(sc, u)
    await seedDatedProfiles(sc, u)
    await net.network.processAll()
    seedEnd = new Date().toISOString()
    ours = await startOurServer({
      schema: net.schema,
      plcUrl: net.network.plc.url,
      pdsUrl: net.network.pds.url,
    })
    client = net.clientFor(ours.server.url)
  })
  afterAll(async () => {
    await ours?.close()
    await net?.close()
  })

  /** The seeded verifications a list holds, in its order: sortedAt desc, then the other did. */
  const expected = (side: 'issuer' | 'subject', did: Did): Seeded[] => {
    const other = side === 'issuer' ? 'subject' : 'issuer'
    // A future createdAt sorts by its indexing time, later than every past-dated one.
    const time = (v: Seeded) => (v.createdAt === FUTURE ? '9' : v.createdAt)
    return verifications
      .filter((v) => v[side] === did)
      .sort((a, b) => cmp(time(b), time(a)) || cmp(b[other], a[other]))
  }

  const shape = (v: Listed) => ({
    issuer: v.actorDid,
    subject: v.subjectDid,
    rkey: v.rkey,
    createdAt: v.createdAt?.toDate().toISOString(),
  })

  it('GetVerificationsIssued: every issuer, walked at several limits', async () => {
    for (const did of [...Object.values(u), MISSING_DID as Did]) {
      const want = expected('issuer', did)
      for (const limit of LIMITS) {
        const got = await walk(limit, async (cursor) => {
          const res = await client.getVerificationsIssued({ actorDid: did, limit, cursor })
          return { items: res.verifications, cursor: res.cursor }
        })
        expect(got.map(shape), `issued by ${did} at ${limit}`).toEqual(want)
        checkTimes(got)
      }
    }
    // Alice issued the most: one later, three tied (and one duplicate the index set aside).
    expect(expected('issuer', u.alice!).length).toBe(5)
  })

  it('GetVerificationsReceived: every subject, walked at several limits', async () => {
    for (const did of [...Object.values(u), MISSING_DID as Did]) {
      const want = expected('subject', did)
      for (const limit of LIMITS) {
        const got = await walk(limit, async (cursor) => {
          const res = await client.getVerificationsReceived({ subjectDid: did, limit, cursor })
          return { items: res.verifications, cursor: res.cursor }
        })
        expect(got.map(shape), `received by ${did} at ${limit}`).toEqual(want)
        checkTimes(got)
      }
    }
    expect(expected('subject', u.fred!).length).toBe(5)
    // The future-dated verification sorts first, by when it was indexed.
    const alice = await client.getVerificationsReceived({ subjectDid: u.alice!, limit: 1 })
    const [first] = alice.verifications
    expect(first?.actorDid).toBe(u.dan)
    expect(first?.sortedAt?.toDate().toISOString()).toBe(first?.indexedAt?.toDate().toISOString())
  })

  it('verification lists: a zero limit, malformed cursors', async () => {
    const issued = await client.getVerificationsIssued({ actorDid: u.alice!, limit: 0 })
    expect(issued.verifications).toEqual([])
    expect(issued.cursor).toBe('')
    const received = await client.getVerificationsReceived({ subjectDid: u.fred!, limit: -1 })
    expect(received.verifications).toEqual([])
    for (const cursor of ['garbage', '123', 'abc__did:plc:x', '__x']) {
      await expectCode(
        client.getVerificationsIssued({ actorDid: u.alice!, limit: 2, cursor }),
        Code.InvalidArgument,
      )
      await expectCode(
        client.getVerificationsReceived({ subjectDid: u.fred!, limit: 2, cursor }),
        Code.InvalidArgument,
      )
    }
  })

  describe('thread mutes', () => {
    const roots = () => [
      sc.posts[u.alice!]![0]!.ref.uriStr,
      sc.posts[u.bob!]![0]!.ref.uriStr,
      sc.posts[u.carol!]![0]!.ref.uriStr,
    ]
    const missingRoot = `at://${MISSING_DID}/app.bsky.feed.post/3kaaaaaaaaaaa`

    /** Both dataplanes read the same table: each must see exactly the mutes we expect. */
    const expectMutes = async (actor: Did, muted: string[]) => {
      const threadRoots = [...roots(), missingRoot]
      const want = threadRoots.map((uri) => muted.includes(uri))
      for (const dp of [client, net.stock]) {
        const res = await dp.getThreadMutesOnSubjects({ actorDid: actor, threadRoots })
        expect(res.muted, `${actor} mutes`).toEqual(want)
      }
    }

    /** What the stock AppView shows the viewer for the thread, read through the stock dataplane. */
    const appViewThreadMuted = async (viewer: Did, uri: string): Promise<boolean> => {
      const nsid = 'app.bsky.feed.getPostThread'
      const headers = await net.network.serviceHeaders(viewer, nsid)
      const url = `${net.network.bsky.url}/xrpc/${nsid}?uri=${encodeURIComponent(uri)}&depth=0`
      const res = await fetch(url, { headers })
      expect(res.status).toBe(200)
      const body = (await res.json()) as {
        thread: { post: { viewer?: { threadMuted?: boolean } } }
      }
      return body.thread.post.viewer?.threadMuted ?? false
    }

    it('CreateThreadMute writes the row bsync writes; repeats keep the first time', async () => {
      const [r0, r1, r2] = roots() as [string, string, string]
      // Alice mutes through the AppView: bsync, then the stock's subscription, writes the row.
      await appView(net, u.alice!, 'app.bsky.graph.muteThread', { root: r0 })
      await net.network.processAll()
      await client.createThreadMute({ actorDid: u.bob!, threadRoot: r0 })
      await client.createThreadMute({ actorDid: u.bob!, threadRoot: r1 })
      await client.createThreadMute({ actorDid: u.carol!, threadRoot: r1 })
      await client.createThreadMute({ actorDid: u.carol!, threadRoot: r2 })
      await expectMutes(u.alice!, [r0])
      await expectMutes(u.bob!, [r0, r1])
      await expectMutes(u.carol!, [r1, r2])
      await expectMutes(u.dan!, [])

      const rows = await ours.db.db
        .selectFrom('thread_mute')
        .selectAll()
        .where('rootUri', '=', r0)
        .orderBy('mutedByDid')
        .execute()
      const bsyncRow = rows.find((r) => r.mutedByDid === u.alice)!
      const ourRow = rows.find((r) => r.mutedByDid === u.bob)!
      for (const row of [bsyncRow, ourRow]) {
        expect(row.createdAt).toBe(new Date(row.createdAt).toISOString())
      }
      await client.createThreadMute({ actorDid: u.bob!, threadRoot: r0 })
      const again = await ours.db.db
        .selectFrom('thread_mute')
        .select('createdAt')
        .where('rootUri', '=', r0)
        .where('mutedByDid', '=', u.bob!)
        .execute()
      expect(again).toEqual([{ createdAt: ourRow.createdAt }])

      // The stock AppView sees our mute as it sees bsync's.
      expect(await appViewThreadMuted(u.bob!, r0)).toBe(true)
      expect(await appViewThreadMuted(u.alice!, r0)).toBe(true)
      expect(await appViewThreadMuted(u.dan!, r0)).toBe(false)
    })

    it('DeleteThreadMute removes one (actor, root) row, either writer’s; missing is fine', async () => {
      const [r0, r1, r2] = roots() as [string, string, string]
      await client.deleteThreadMute({ actorDid: u.bob!, threadRoot: r0 })
      await client.deleteThreadMute({ actorDid: u.bob!, threadRoot: r0 })
      await client.deleteThreadMute({ actorDid: u.dan!, threadRoot: missingRoot })
      await expectMutes(u.bob!, [r1])
      await expectMutes(u.alice!, [r0])
      expect(await appViewThreadMuted(u.bob!, r0)).toBe(false)
      // The row bsync wrote goes the same way.
      await client.deleteThreadMute({ actorDid: u.alice!, threadRoot: r0 })
      await expectMutes(u.alice!, [])
      expect(await appViewThreadMuted(u.alice!, r0)).toBe(false)
      await expectMutes(u.carol!, [r1, r2])
    })

    it('ClearThreadMutes removes only that actor’s', async () => {
      const [r0, r1, r2] = roots() as [string, string, string]
      await client.createThreadMute({ actorDid: u.bob!, threadRoot: r2 })
      await client.createThreadMute({ actorDid: u.alice!, threadRoot: r2 })
      await client.clearThreadMutes({ actorDid: u.bob! })
      await client.clearThreadMutes({ actorDid: u.dan! })
      await expectMutes(u.bob!, [])
      await expectMutes(u.carol!, [r1, r2])
      await expectMutes(u.alice!, [r2])
      await client.clearThreadMutes({ actorDid: u.carol! })
      await expectMutes(u.carol!, [])
      await expectMutes(u.alice!, [r2])
      expect(r0).toBeTruthy()
    })

    it('refuses a bad actor did or thread root with InvalidArgument, writing nothing', async () => {
      const root = roots()[0]!
      const before = await ours.db.db.selectFrom('thread_mute').selectAll().execute()
      const badDids = ['', 'alice.test', 'did:plc:', 'did:PLC:abc', 'did:plc:abc def', 'at://x']
      const badRoots = [
        '',
        'not a uri',
        root.replace('at://', ''),
        root.replace('at://', 'https://'),
        root.replace(u.alice!, 'alice.test'),
        root.replace('app.bsky.feed.post', 'app.bsky.graph.list'),
        root.slice(0, root.lastIndexOf('/')),
        `${root}/extra`,
        `${root}?x=1`,
        `${root}#frag`,
      ]
      for (const actorDid of badDids) {
        await expectCode(
          client.createThreadMute({ actorDid, threadRoot: root }),
          Code.InvalidArgument,
        )
        await expectCode(
          client.deleteThreadMute({ actorDid, threadRoot: root }),
          Code.InvalidArgument,
        )
        await expectCode(client.clearThreadMutes({ actorDid }), Code.InvalidArgument)
      }
      for (const threadRoot of badRoots) {
        await expectCode(
          client.createThreadMute({ actorDid: u.bob!, threadRoot }),
          Code.InvalidArgument,
        )
        await expectCode(
          client.deleteThreadMute({ actorDid: u.bob!, threadRoot }),
          Code.InvalidArgument,
        )
      }
      expect(await ours.db.db.selectFrom('thread_mute').selectAll().execute()).toEqual(before)
    })
  })

  it('GetNewUserCountForRange: profiles by createdAt in [start, end)', async () => {
    const count = async (start?: string, end?: string) => {
      const res = await client.getNewUserCountForRange({ start: ts(start), end: ts(end) })
      return res.count
    }
    // Dated by the seed: eve 2023-03-01, fred 2023-03-15 12:00, gina 2023-04-01 (see below).
    expect(await count('2023-03-01T00:00:00.000Z', '2023-04-01T00:00:00.000Z')).toBe(2)
    expect(await count('2023-03-01T00:00:00.001Z', '2023-04-01T00:00:00.000Z')).toBe(1)
    expect(await count('2023-03-01T00:00:00.000Z', '2023-04-01T00:00:00.001Z')).toBe(3)
    expect(await count('2023-04-01T00:00:00.000Z', '2023-04-01T00:00:00.001Z')).toBe(1)
    expect(await count('2023-03-15T12:00:00.000Z', '2023-03-15T12:00:00.000Z')).toBe(0)
    expect(await count('2023-04-01T00:00:00.000Z', '2023-03-01T00:00:00.000Z')).toBe(0)
    expect(await count(undefined, '2023-12-31T00:00:00.000Z')).toBe(3)
    expect(await count('2022-01-01T00:00:00.000Z', '2023-01-01T00:00:00.000Z')).toBe(0)
    // Alice, bob and carol got undated profiles in the seed (dan none): dated by indexing.
    expect(await count(seedStart, seedEnd)).toBe(3)
    expect(await count(seedStart)).toBe(3)
    expect(await count(seedEnd)).toBe(0)
    // Open on both sides: everything, the network's own accounts included.
    const all = await count()
    expect(all).toBe((await count(undefined, seedStart)) + 3)
    expect(all).toBeGreaterThanOrEqual(6)

    const far = new Timestamp({ seconds: BigInt(400_000_000_000), nanos: 0 })
    await expectCode(client.getNewUserCountForRange({ start: far }), Code.InvalidArgument)
    await expectCode(client.getNewUserCountForRange({ end: far }), Code.InvalidArgument)
  })

  it('GetFeedGeneratorStatus: valid, taken down, deactivated and unknown, in order', async () => {
    const a = await sc.createFeedGen(u.alice!, 'did:web:feed-a.test', 'a')
    const b = await sc.createFeedGen(u.alice!, 'did:web:feed-b.test', 'b')
    const h = await sc.createFeedGen(u.hank!, 'did:web:feed-h.test', 'h')
    const i = await sc.createFeedGen(u.ivy!, 'did:web:feed-i.test', 'i')
    await net.network.processAll()
    await client.takedownRecord({ recordUri: b.uriStr, ref: 'mod-1' })
    await client.takedownActor({ did: u.hank!, ref: 'mod-2' })
    await client.updateActorUpstreamStatus({
      actorDid: u.ivy!,
      active: false,
      upstreamStatus: 'deactivated',
    })
    const missing = `at://${u.alice}/app.bsky.feed.generator/missing`
    const post = sc.posts[u.alice!]![0]!.ref.uriStr
    const uris = [a, b, h, i].map((r) => r.uriStr)
    const res = await client.getFeedGeneratorStatus({
      uris: [...uris, missing, post, 'not a uri', uris[0]!],
    })
    expect(res.status).toEqual([
      'valid',
      'takendown',
      'takendown',
      'deactivated',
      '',
      '',
      '',
      'valid',
    ])
    expect((await client.getFeedGeneratorStatus({ uris: [] })).status).toEqual([])

    await client.untakedownRecord({ recordUri: b.uriStr })
    await client.updateActorUpstreamStatus({
      actorDid: u.ivy!,
      active: false,
      upstreamStatus: 'suspended',
    })
    const after = await client.getFeedGeneratorStatus({ uris })
    expect(after.status).toEqual(['valid', 'valid', 'takendown', 'takendown'])
    await expect(net.stock.getFeedGeneratorStatus({ uris })).rejects.toThrow()
  })
})

/**
 * Verifications through the PDS, with createdAt chosen to tie and order them. Returns the ones the
 * index lists: a second verification of the same subject by the same issuer is set aside as a
 * duplicate, and a deleted one is gone.
 */
async function seedVerifications(sc: Sc, u: Record<string, Did>): Promise<Seeded[]> {
  const { alice, bob, carol, dan, eve, fred } = u as Record<string, Did>
  const plan: [Did, Did, string][] = [
    [alice!, bob!, T1],
    [alice!, carol!, T1],
    [alice!, dan!, T1],
    [alice!, eve!, T2],
    [alice!, fred!, T0],
    [bob!, fred!, T1],
    [carol!, fred!, T1],
    [dan!, fred!, T2],
    [eve!, fred!, T0],
    [alice!, fred!, T2],
    [carol!, alice!, T2],
    [dan!, alice!, FUTURE],
  ]
  const seen = new Set<string>()
  const listed: Seeded[] = []
  for (const [issuer, subject, createdAt] of plan) {
    const uri = await sc.verify(issuer, subject, `${subject.slice(-6)}.test`, 'someone', {
      createdAt,
    })
    const pair = `${issuer} ${subject}`
    if (!seen.has(pair)) listed.push({ issuer, subject, rkey: uri.rkey, createdAt })
    seen.add(pair)
  }
  await sc.network.processAll()
  await sc.verify(eve!, carol!, 'carol.test', 'Carol', { createdAt: T1 })
  await sc.network.processAll()
  await sc.unverify(eve!, carol!)
  return listed
}

/** Profiles with a createdAt of their own, for the new-user count. */
async function seedDatedProfiles(sc: Sc, u: Record<string, Did>): Promise<void> {
  await setProfile(sc, u.eve!, 'Eve', '', { createdAt: '2023-03-01T00:00:00.000Z' })
  await setProfile(sc, u.fred!, 'Fred', '', { createdAt: '2023-03-15T12:00:00.000Z' })
  await setProfile(sc, u.gina!, 'Gina', '', { createdAt: '2023-04-01T00:00:00.000Z' })
}

/** Calls an AppView write (muteThread, …) as the user, the way the PDS would proxy it. */
async function appView(net: StockNetwork, did: Did, nsid: string, body: unknown): Promise<void> {
  const headers = await net.network.serviceHeaders(did, nsid)
  const res = await fetch(`${net.network.bsky.url}/xrpc/${nsid}`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
  if (!res.ok) throw new Error(`${nsid}: ${res.status} ${await res.text()}`)
}

/** Walks a list to its end; every page but the last is full, and holds at most `limit`. */
async function walk<T>(
  limit: number,
  fetchPage: (cursor: string) => Promise<{ items: T[]; cursor: string }>,
): Promise<T[]> {
  const all: T[] = []
  let cursor = ''
  for (let i = 0; i < 100; i++) {
    const page = await fetchPage(cursor)
    expect(page.items.length).toBeLessThanOrEqual(limit)
    all.push(...page.items)
    if (!page.cursor) return all
    expect(page.items.length).toBe(limit)
    cursor = page.cursor
  }
  throw new Error('more than 100 pages')
}

/** sortedAt is the earlier of createdAt and indexedAt, as the stock's generated column has it. */
function checkTimes(items: Listed[]): void {
  for (const v of items) {
    const [c, i, s] = [v.createdAt, v.indexedAt, v.sortedAt].map((t) => t!.toDate().getTime())
    expect(s).toBe(Math.min(c!, i!))
  }
}

async function expectCode(call: Promise<unknown>, code: Code): Promise<void> {
  const err = await call.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(err, 'rejected').toBeDefined()
  expect(ConnectError.from(err).code).toBe(code)
}

const ts = (iso: string | undefined) => (iso ? Timestamp.fromDate(new Date(iso)) : undefined)

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

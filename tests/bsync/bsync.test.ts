// bsync through its real path: users act through the stock AppView (which writes bsync), the
// stock dataplane's consumer and ours each tail the same bsync, and the stock AppView on each
// dataplane must answer the same; the tables bsync feeds must hold the same rows. Then a restart
// (kill -9) with operations made while ours is down, and operations that do not parse.
import { createPromiseClient } from '@connectrpc/connect'
import { createConnectTransport } from '@connectrpc/connect-node'
import net_ from 'node:net'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { BsyncService, Method, MuteOperation_Type } from '@openplane/proto/bsync'
import {
  act as actThrough,
  appViewDiff,
  caughtUp as waitForBoth,
  type AppViewDiff,
  type Params,
} from '../harness/appview-diff.ts'
import { PG_URL, uniqueName } from '../harness/env.ts'
import {
  appViewEnvFor,
  freePort,
  spawnAppView,
  spawnDataplane,
  type Child,
} from '../harness/processes.ts'
import { seedBasic, type Did } from '../harness/seed.ts'
import { dropSchemas, startStockNetwork, type StockNetwork } from '../harness/stock-network.ts'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
type Heads = { op?: string; mute?: string; notif?: string }
interface BsyncState {
  cursor: string | null
  connected: boolean
  applied: number
  skipped: number
  lastError: string | null
}
type Streams = Record<'op' | 'mute' | 'notif', BsyncState>

/** The rows bsync feeds, without the times each side stamped them with. */
const PROJECTIONS: Record<string, string> = {
  mute: `select "mutedByDid", "subjectDid", "onlyReposts", "onlyQuoteposts" from mute`,
  list_mute: `select "mutedByDid", "listUri" from list_mute`,
  thread_mute: `select "mutedByDid", "rootUri" from thread_mute`,
  private_data: `select "actorDid", namespace, key, payload from private_data`,
  bookmark: `select creator, key, "subjectUri", "subjectCid" from bookmark`,
  draft: `select creator, key, payload from draft`,
  activity_subscription: `select creator, key, "subjectDid", post, reply from activity_subscription`,
  actor_state: `select did, "priorityNotifs" from actor_state`,
  age_assurance: `select did, "ageAssuranceStatus", "ageAssuranceLastInitiatedAt", "ageAssuranceAccess",
    "ageAssuranceCountryCode", "ageAssuranceRegionCode" from actor where "ageAssuranceStatus" is not null`,
  bookmark_count: `select uri, "bookmarkCount" from post_agg where "bookmarkCount" <> 0`,
}

describe('bsync: the stock AppView on our dataplane vs on the stock dataplane', () => {
  let net: StockNetwork
  let dataplane: Child
  let appview: Child
  let port: number
  let u: Record<'alice' | 'bob' | 'carol' | 'dan', Did>
  let admin: pg.Client
  const schema = uniqueName('op_bsync')
  let bsyncClient: ReturnType<typeof createPromiseClient<typeof BsyncService>>
  let diff: AppViewDiff

  const startOurs = () =>
    spawnDataplane({
      pgUrl: PG_URL,
      schema,
      plcUrl: net.network.plc.url,
      pdsUrl: net.network.pds.url,
      port,
      extra: {
        DATAPLANE_BSYNC_URL: net.network.bsync.url,
        DATAPLANE_BSYNC_API_KEY: 'bsync-api-key',
        DATAPLANE_BSYNC_HTTP_VERSION: '1.1',
      },
    })

  beforeAll(async () => {
    net = await startStockNetwork()
    port = await freePort()
    dataplane = await startOurs()
    appview = await spawnAppView(appViewEnvFor(net.network, dataplane.url))
    diff = appViewDiff(net, () => appview.url)
    u = await seedBasic(net.sc)
    await net.network.processAll()
    admin = new pg.Client({ connectionString: PG_URL })
    await admin.connect()
    bsyncClient = createPromiseClient(
      BsyncService,
      createConnectTransport({
        baseUrl: net.network.bsync.url,
        httpVersion: '1.1',
        interceptors: [
          (next) => (req) => {
            req.header.set('authorization', 'Bearer bsync-api-key')
            return next(req)
          },
        ],
      }),
    )
  }, 120_000)

  afterAll(async () => {
    await admin?.end()
    await appview?.stop()
    await dataplane?.stop()
    await net?.close()
    await dropSchemas([schema])
  })

  const act = (did: Did, nsid: string, body: unknown) => actThrough(net, did, nsid, body)
  const heads = (): Promise<Heads> => net.network.bsync.getStreamHeads()
  const caughtUp = () => waitForBoth(net, dataplane.url)
  const same = (nsid: string, params: Params, viewer?: Did, clock: string[] = []) =>
    diff.same(nsid, params, viewer, { clock })

  async function rows(s: string, name: string): Promise<string[]> {
    await admin.query(`set search_path to "${s}"`)
    const { rows } = await admin.query(PROJECTIONS[name]!)
    return rows.map((r: unknown) => JSON.stringify(r)).sort()
  }

  /** Every bsync-fed table holds the same rows on both sides; returns ours for inspection. */
  async function sameTables(): Promise<Record<string, string[]>> {
    const out: Record<string, string[]> = {}
    for (const name of Object.keys(PROJECTIONS)) {
      const [stock, ours] = [await rows(net.schema, name), await rows(schema, name)]
      expect({ table: name, rows: ours }).toEqual({ table: name, rows: stock })
      out[name] = ours
    }
    return out
  }

  async function health(): Promise<Record<'op' | 'mute' | 'notif', BsyncState>> {
    const res = await fetch(`${dataplane.url}/_health`)
    type Body = { dependencies: { bsync: Record<'op' | 'mute' | 'notif', BsyncState> } }
    return ((await res.json()) as Body).dependencies.bsync
  }

  it('every kind of operation lands as on the stock, and the AppView answers the same', async () => {
    const sc = net.sc
    const { alice, bob, carol, dan } = u
    const post = (did: Did, i = 0) => sc.posts[did]![i]!.ref
    const list = await sc.createList(alice, 'friends', 'curate')
    await sc.addToList(alice, bob, list)
    const modList = await sc.createList(bob, 'mods', 'mod')
    await net.network.processAll()

    // Mutes: actors (with the repost/quote flags), lists and threads; then some undone.
    await act(alice, 'app.bsky.graph.muteActor', { actor: bob })
    await act(alice, 'app.bsky.graph.muteActor', { actor: carol })
    await act(dan, 'app.bsky.graph.muteActor', { actor: alice, onlyReposts: true })
    await act(carol, 'app.bsky.graph.muteActor', { actor: dan, onlyQuoteposts: true })
    await act(alice, 'app.bsky.graph.unmuteActor', { actor: carol })
    await act(dan, 'app.bsky.graph.muteActorList', { list: list.uriStr })
    await act(dan, 'app.bsky.graph.muteActorList', { list: modList.uriStr })
    await act(dan, 'app.bsky.graph.unmuteActorList', { list: list.uriStr })
    await act(carol, 'app.bsky.graph.muteActorList', { list: list.uriStr })
    await act(alice, 'app.bsky.graph.muteThread', { root: post(alice).uriStr })
    await act(bob, 'app.bsky.graph.muteThread', { root: post(alice).uriStr })
    await act(bob, 'app.bsky.graph.unmuteThread', { root: post(alice).uriStr })
    // bsync's clear (an account's mutes at once): carol's actor and list mutes go, not threads.
    await act(carol, 'app.bsky.graph.muteThread', { root: post(bob).uriStr })
    await bsyncClient.addMuteOperation({ type: MuteOperation_Type.CLEAR, actorDid: carol })

    // Bookmarks, with the counts the AppView shows.
    for (const [who, ref] of [
      [alice, post(bob)],
      [alice, post(carol)],
      [carol, post(bob)],
      [dan, post(bob)],
    ] as const) {
      await act(who, 'app.bsky.bookmark.createBookmark', { uri: ref.uriStr, cid: ref.cidStr })
    }
    // The AppView finds the bookmark to delete through its dataplane: let both index it first.
    await caughtUp()
    await act(dan, 'app.bsky.bookmark.deleteBookmark', { uri: post(bob).uriStr })

    // Drafts: created, updated, deleted.
    const ids: string[] = []
    for (let i = 0; i < 3; i++) {
      const { id } = (await act(alice, 'app.bsky.draft.createDraft', {
        draft: { posts: [{ text: `draft ${i}` }] },
      })) as { id: string }
      ids.push(id)
    }
    await act(alice, 'app.bsky.draft.updateDraft', {
      draft: { id: ids[0], draft: { posts: [{ text: 'draft 0, edited' }] } },
    })
    await act(alice, 'app.bsky.draft.deleteDraft', { id: ids[1] })

    // Notification settings: priority (its own stream), preferences (private data).
    await act(alice, 'app.bsky.notification.putPreferences', { priority: true })
    await act(bob, 'app.bsky.notification.putPreferences', { priority: true })
    await act(bob, 'app.bsky.notification.putPreferences', { priority: false })
    await act(alice, 'app.bsky.notification.putPreferencesV2', {
      like: { include: 'follows', list: true, push: false },
      verified: { list: false, push: true },
    })

    // Activity subscriptions: created, changed, removed.
    // A second put for a subject updates (or, with nothing on, removes) the first one, which
    // the AppView looks up through its dataplane: each waits for the one before to be indexed.
    for (const [subject, post, reply] of [
      [bob, true, false],
      [bob, true, true],
      [carol, true, false],
      [carol, false, false],
    ] as const) {
      await act(alice, 'app.bsky.notification.putActivitySubscription', {
        subject,
        activitySubscription: { post, reply },
      })
      await caughtUp()
    }

    // Age assurance events (both generations), as the AppView's flows stash them.
    const put = (actorDid: Did, namespace: string, key: string, payload: unknown) =>
      bsyncClient.putOperation({
        actorDid,
        namespace,
        key,
        method: Method.CREATE,
        payload: Buffer.from(JSON.stringify({ $type: namespace, ...(payload as object) })),
      })
    const at = new Date().toISOString()
    await put(carol, 'app.bsky.unspecced.defs#ageAssuranceEvent', '3kaaa', {
      status: 'pending',
      createdAt: at,
      attemptId: 'a1',
    })
    await put(dan, 'app.bsky.unspecced.defs#ageAssuranceEvent', '3kaab', {
      status: 'pending',
      createdAt: at,
      attemptId: 'a2',
    })
    await put(dan, 'app.bsky.ageassurance.defs#event', '3kaac', {
      status: 'assured',
      access: 'full',
      countryCode: 'GB',
      regionCode: 'ENG',
      createdAt: at,
      attemptId: 'a2',
    })

    await caughtUp()
    const tables = await sameTables()
    // Non-vacuous: each kind really arrived.
    expect(tables.mute).toHaveLength(2)
    expect(tables.list_mute).toHaveLength(1)
    expect(tables.thread_mute).toHaveLength(2)
    expect(tables.bookmark).toHaveLength(3)
    expect(tables.draft).toHaveLength(2)
    expect(tables.activity_subscription).toHaveLength(1)
    expect(tables.actor_state).toHaveLength(2)
    expect(tables.age_assurance).toHaveLength(2)
    expect(tables.bookmark_count).toEqual(
      [
        JSON.stringify({ uri: post(bob).uriStr, bookmarkCount: 2 }),
        JSON.stringify({ uri: post(carol).uriStr, bookmarkCount: 1 }),
      ].sort(),
    )

    for (const viewer of [alice, bob, carol, dan]) {
      await same('app.bsky.graph.getMutes', {}, viewer)
      await same('app.bsky.graph.getListMutes', {}, viewer)
      await same('app.bsky.bookmark.getBookmarks', {}, viewer, ['createdAt'])
      await same('app.bsky.draft.getDrafts', {}, viewer, ['createdAt', 'updatedAt'])
      await same('app.bsky.notification.getPreferences', {}, viewer)
      await same('app.bsky.notification.listActivitySubscriptions', {}, viewer)
      await same('app.bsky.unspecced.getAgeAssuranceState', {}, viewer)
      await same('app.bsky.ageassurance.getState', { countryCode: 'GB' }, viewer)
      await same('app.bsky.actor.getProfiles', { actors: [alice, bob, carol, dan] }, viewer)
      await same(
        'app.bsky.feed.getPosts',
        { uris: [post(alice).uriStr, post(bob).uriStr, post(carol).uriStr] },
        viewer,
      )
      await same('app.bsky.feed.getPostThread', { uri: post(alice).uriStr }, viewer)
      await same('app.bsky.feed.getTimeline', {}, viewer)
    }
    const muted = await same('app.bsky.graph.getMutes', {}, alice)
    expect((muted.body as { mutes: unknown[] }).mutes).toHaveLength(1)
  })

  it('a kill -9 and restart resume at the stored cursors: nothing lost, nothing applied twice', async () => {
    const { alice, bob, carol, dan } = u
    const danMutesAlice = (r: string) =>
      r.includes(`"mutedByDid":"${dan}"`) && r.includes(`"subjectDid":"${alice}"`)
    const before = await heads()
    const snapshot = async (query: string) => ({ query, rows: await ourRows(query) })
    const kept = {
      mute: await snapshot('select "mutedByDid", "subjectDid", "createdAt" from mute'),
      bookmark: await snapshot('select creator, key, "indexedAt" from bookmark'),
      privateData: await snapshot(
        'select "actorDid", namespace, key, "indexedAt", "updatedAt" from private_data',
      ),
    }
    expect(kept.mute.rows.some(danMutesAlice)).toBe(true)
    await dataplane.stop('SIGKILL')
    // While ours is down: one operation of each stream.
    await act(bob, 'app.bsky.graph.muteActor', { actor: dan })
    await act(carol, 'app.bsky.bookmark.createBookmark', {
      uri: net.sc.posts[alice]![0]!.ref.uriStr,
      cid: net.sc.posts[alice]![0]!.ref.cidStr,
    })
    await act(carol, 'app.bsky.notification.putPreferences', { priority: true })
    dataplane = await startOurs()
    // And after it is back.
    await act(dan, 'app.bsky.graph.unmuteActor', { actor: alice })
    const after = await caughtUp()
    await sameTables()
    // This process applied exactly the operations made since the kill.
    const state = await health()
    for (const s of ['op', 'mute', 'notif'] as const) {
      expect({ s, n: state[s].applied + state[s].skipped }).toEqual({
        s,
        n: Number(after[s] ?? 0) - Number(before[s] ?? 0),
      })
      expect(state[s].cursor).toBe(after[s] ?? null)
    }
    // Rows from before the restart were not rewritten (their stamps are the ones they had), but
    // for dan's mute of alice, undone since.
    expect(await ourRows(kept.mute.query)).toEqual(
      expect.arrayContaining(kept.mute.rows.filter((r) => !danMutesAlice(r))),
    )
    for (const k of [kept.bookmark, kept.privateData]) {
      expect(await ourRows(k.query)).toEqual(expect.arrayContaining(k.rows))
    }
  })

  it('operations that do not parse are skipped and counted; the stream goes on', async () => {
    const { alice } = u
    const before = await health()
    // bsync itself refuses bad DIDs, keys and non-JSON payloads; what passes it and still does
    // not parse here: an unknown namespace, and payloads not of their namespace's shape.
    const bad = [
      { namespace: 'com.example.unknown.defs#thing', key: '3kbad1', payload: '{}' },
      {
        namespace: 'app.bsky.bookmark.defs#bookmark',
        key: '3kbad2',
        payload: JSON.stringify({ subject: { uri: 'nope', cid: 'x' } }),
      },
      {
        namespace: 'app.bsky.notification.defs#subjectActivitySubscription',
        key: '3kbad3',
        payload: '[]',
      },
    ]
    for (const b of bad) {
      await bsyncClient.putOperation({
        actorDid: alice,
        namespace: b.namespace,
        key: b.key,
        method: Method.CREATE,
        payload: Buffer.from(b.payload),
      })
    }
    // A good one after them still lands.
    await act(alice, 'app.bsky.graph.muteActor', { actor: u.dan })
    await caughtUp()
    const after = await health()
    expect(after.op.skipped - before.op.skipped).toBe(3)
    expect(await ourRows(`select key from private_data where key like '3kbad%'`)).toEqual([])
    expect(
      await ourRows(`select "subjectDid" from mute where "mutedByDid" = '${alice}'`),
    ).toContain(JSON.stringify({ subjectDid: u.dan }))
    const metrics = await (await fetch(`${dataplane.url}/metrics`)).text()
    expect(metrics).toMatch(
      /openplane_bsync_operations_total\{stream="op",outcome="skipped"\} [1-9]/,
    )
  })

  it('bsync unreachable: retried with backoff, shown in /_health and metrics, caught up when back', async () => {
    const { alice, carol } = u
    // A forwarder to bsync that is not listening yet.
    const port = await freePort()
    const target = new URL(net.network.bsync.url)
    const forward = net_.createServer((client) => {
      const upstream = net_.connect(Number(target.port), target.hostname)
      client.pipe(upstream).pipe(client)
      const close = () => (client.destroy(), upstream.destroy())
      client.on('error', close)
      upstream.on('error', close)
    })
    const second = uniqueName('op_bsync_down')
    const other = await spawnDataplane({
      pgUrl: PG_URL,
      schema: second,
      plcUrl: net.network.plc.url,
      pdsUrl: net.network.pds.url,
      extra: {
        DATAPLANE_BSYNC_URL: `http://127.0.0.1:${port}`,
        DATAPLANE_BSYNC_API_KEY: 'bsync-api-key',
        DATAPLANE_BSYNC_HTTP_VERSION: '1.1',
      },
    })
    try {
      const healthOf = async () =>
        (
          (await (await fetch(`${other.url}/_health`)).json()) as {
            dependencies: { bsync: Streams }
          }
        ).dependencies.bsync
      // Down: every stream reports it, the process keeps serving.
      for (let i = 0; i < 50 && (await healthOf()).op.lastError === null; i++) await sleep(100)
      const down = await healthOf()
      for (const s of ['op', 'mute', 'notif'] as const) {
        expect(down[s].connected).toBe(false)
        expect(down[s].lastError).toBeTruthy()
      }
      const metrics = await (await fetch(`${other.url}/metrics`)).text()
      expect(metrics).toMatch(/openplane_bsync_errors_total\{stream="op"\} [1-9]/)
      expect(metrics).toMatch(/openplane_bsync_connected\{stream="op"\} 0/)
      // Back: it catches up with everything bsync holds, this mute included.
      await act(carol, 'app.bsky.graph.muteActor', { actor: alice })
      await new Promise<void>((resolve) => forward.listen(port, '127.0.0.1', resolve))
      const h = await heads()
      const q = new URLSearchParams({
        timeoutMs: '60000',
        bsyncOp: h.op!,
        bsyncMute: h.mute!,
        bsyncNotif: h.notif!,
      })
      const res = await fetch(`${other.url}/_wait?${q}`)
      expect(res.status).toBe(200)
      expect((await healthOf()).mute.connected).toBe(true)
      await admin.query(`set search_path to "${second}"`)
      const { rows } = await admin.query(
        `select 1 from mute where "mutedByDid" = $1 and "subjectDid" = $2`,
        [carol, alice],
      )
      expect(rows).toHaveLength(1)
    } finally {
      await other.stop()
      forward.close()
      await dropSchemas([second])
    }
  })

  async function ourRows(query: string): Promise<string[]> {
    await admin.query(`set search_path to "${schema}"`)
    const { rows } = await admin.query(query)
    return rows.map((r: unknown) => JSON.stringify(r)).sort()
  }
})

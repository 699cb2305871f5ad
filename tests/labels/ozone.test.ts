// Labels through their real path: moderators label and unlabel through ozone (dev-env's labeler),
// ozone signs and serves them on subscribeLabels, and openplane (DATAPLANE_LABELERS) checks each
// signature against ozone's #atproto_label key and stores them. The stock dataplane never fills
// its label table, so the stock AppView on it shows none of them; on openplane it shows them.
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { appViewEnvFor, spawnAppView, spawnDataplane, type Child } from '../harness/processes.ts'
import { seedBasic, type Did } from '../harness/seed.ts'
import { dropSchemas, startStockNetwork, type StockNetwork } from '../harness/stock-network.ts'

describe('labels from ozone', () => {
  let net: StockNetwork
  let dataplane: Child
  let appview: Child
  let labeler: string
  let u: Record<'alice' | 'bob' | 'carol' | 'dan', Did>
  let admin: pg.Client
  const schema = uniqueName('op_labels')

  beforeAll(async () => {
    net = await startStockNetwork()
    const { network } = net
    labeler = network.ozone.ctx.cfg.service.did
    dataplane = await spawnDataplane({
      pgUrl: PG_URL,
      schema,
      plcUrl: network.plc.url,
      pdsUrl: network.pds.url,
      extra: { DATAPLANE_FIREHOSE_CURSOR: '0', DATAPLANE_LABELERS: labeler },
    })
    appview = await spawnAppView(appViewEnvFor(network, dataplane.url))
    u = await seedBasic(net.sc)
    await network.processAll()
    admin = new pg.Client({ connectionString: PG_URL })
    await admin.connect()
  }, 120_000)

  afterAll(async () => {
    await admin?.end()
    await appview?.stop()
    await dataplane?.stop()
    await net?.close()
    await dropSchemas([schema])
  })

  const mod = () => net.network.ozone.getModClient()

  async function label(subject: object, create: string[], negate: string[] = [], hours?: number) {
    await mod().emitEvent({
      subject: subject as never,
      event: {
        $type: 'tools.ozone.moderation.defs#modEventLabel',
        createLabelVals: create,
        negateLabelVals: negate,
        ...(hours ? { durationInHours: hours } : {}),
      } as never,
    })
  }

  /** ozone's last label seq, and ours caught up to it (and to the PDS). */
  async function caughtUp(): Promise<number> {
    await net.network.processAll()
    const db = (net.network.ozone.ctx as unknown as { db: { db: unknown } }).db.db as {
      selectFrom(t: string): {
        select(f: (eb: { fn: { max(c: string): { as(n: string): unknown } } }) => unknown[]): {
          executeTakeFirst(): Promise<{ id: number | null } | undefined>
        }
      }
    }
    const row = await db
      .selectFrom('label')
      .select((eb) => [eb.fn.max('id').as('id')])
      .executeTakeFirst()
    const seq = Number(row?.id ?? 0)
    const q = new URLSearchParams({
      timeoutMs: '60000',
      seq: String((await net.network.pds.ctx.sequencer.curr()) ?? 0),
      labels: `${labeler}:${seq}`,
    })
    const res = await fetch(`${dataplane.url}/_wait?${q}`)
    if (!res.ok) throw new Error(`/_wait: ${res.status} ${await res.text()}`)
    return seq
  }

  async function ours(): Promise<{ uri: string; val: string; neg: boolean; exp: boolean }[]> {
    await admin.query(`set search_path to "${schema}"`)
    const { rows } = await admin.query(
      'select uri, val, neg, exp is not null as exp from label where src = $1 order by uri, val',
      [labeler],
    )
    return rows
  }

  /** What ozone says is in force (its queryLabels), as (uri, val) pairs. */
  async function inForce(): Promise<string[]> {
    const res = await fetch(
      `${net.network.ozone.url}/xrpc/com.atproto.label.queryLabels?uriPatterns=*&limit=250`,
    )
    const body = (await res.json()) as { labels: { uri: string; val: string; neg?: boolean }[] }
    const state = new Map<string, boolean>()
    for (const l of body.labels) state.set(`${l.uri} ${l.val}`, !l.neg)
    return [...state]
      .filter(([, on]) => on)
      .map(([k]) => k)
      .sort()
  }

  async function view(base: string, nsid: string, params: Record<string, string>) {
    const url = new URL(`/xrpc/${nsid}`, base)
    for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v)
    return (await fetch(url)).json() as Promise<Record<string, unknown>>
  }

  it('labels and negations arrive verified; GetLabels serves what is in force', async () => {
    const post = net.sc.posts[u.alice]![0]!.ref
    const postSubject = { $type: 'com.atproto.repo.strongRef', uri: post.uriStr, cid: post.cidStr }
    const account = (did: string) => ({ $type: 'com.atproto.admin.defs#repoRef', did })
    await label(postSubject, ['spam', 'nudity'])
    await label(account(u.bob), ['rude'])
    await label(account(u.dan), ['misleading'], [], 24)
    await label(postSubject, [], ['nudity'])
    await caughtUp()

    const rows = await ours()
    const active = rows
      .filter((r) => !r.neg)
      .map((r) => `${r.uri} ${r.val}`)
      .sort()
    expect(active).toEqual(await inForce())
    expect(active).toEqual([`${post.uriStr} spam`, `${u.bob} rude`, `${u.dan} misleading`].sort())
    // The negation is kept (so an older copy of the label cannot come back), and the
    // time-limited label carries its expiry.
    expect(rows.find((r) => r.val === 'nudity')?.neg).toBe(true)
    expect(rows.find((r) => r.val === 'misleading')?.exp).toBe(true)

    // The stock AppView on openplane shows them; on the stock dataplane it cannot.
    const postOnOurs = (await view(appview.url, 'app.bsky.feed.getPosts', { uris: post.uriStr }))
      .posts as { labels: { val: string; src: string }[] }[]
    expect(postOnOurs[0]!.labels.filter((l) => l.src === labeler).map((l) => l.val)).toEqual([
      'spam',
    ])
    const bobOnOurs = (await view(appview.url, 'app.bsky.actor.getProfile', { actor: u.bob }))
      .labels as { val: string; src: string }[]
    expect(bobOnOurs.filter((l) => l.src === labeler).map((l) => l.val)).toEqual(['rude'])
    const bobOnStock = (
      await view(net.network.bsky.url, 'app.bsky.actor.getProfile', { actor: u.bob })
    ).labels as { src: string }[]
    expect(bobOnStock.filter((l) => l.src === labeler)).toEqual([])
  })

  it('a restart resumes at the stored cursor and applies what came meanwhile', async () => {
    const before = (await (await fetch(`${dataplane.url}/_health`)).json()) as {
      dependencies: { labelers: { did: string; cursor: number; applied: number }[] }
    }
    expect(before.dependencies.labelers[0]!.cursor).toBeGreaterThan(0)
    const url = dataplane.url
    await dataplane.stop('SIGKILL')
    await label({ $type: 'com.atproto.admin.defs#repoRef', did: u.carol }, ['spam'])
    await label({ $type: 'com.atproto.admin.defs#repoRef', did: u.bob }, [], ['rude'])
    dataplane = await spawnDataplane({
      pgUrl: PG_URL,
      schema,
      plcUrl: net.network.plc.url,
      pdsUrl: net.network.pds.url,
      port: Number(new URL(url).port),
      extra: { DATAPLANE_LABELERS: labeler },
    })
    const seq = await caughtUp()
    const after = (await (await fetch(`${dataplane.url}/_health`)).json()) as {
      dependencies: { labelers: { cursor: number; applied: number }[] }
    }
    expect(after.dependencies.labelers[0]!.cursor).toBe(seq)
    // Exactly the two labels made while it was down, read once.
    expect(after.dependencies.labelers[0]!.applied).toBe(2)
    const active = (await ours())
      .filter((r) => !r.neg)
      .map((r) => `${r.uri} ${r.val}`)
      .sort()
    expect(active).toEqual(await inForce())
  })

  it('finds labelers through their service records in the index', async () => {
    // A second dataplane naming no labeler: it finds ozone's app.bsky.labeler.service record.
    const second = uniqueName('op_labels_found')
    const found = await spawnDataplane({
      pgUrl: PG_URL,
      schema: second,
      plcUrl: net.network.plc.url,
      pdsUrl: net.network.pds.url,
      extra: {
        DATAPLANE_FIREHOSE_CURSOR: '0',
        DATAPLANE_LABELERS_FROM_RECORDS: 'true',
        DATAPLANE_LABELERS_DISCOVER_SECONDS: '1',
      },
    })
    try {
      const labelers = async () =>
        (
          (await (await fetch(`${found.url}/_health`)).json()) as {
            dependencies: { labelers?: { did: string }[] }
          }
        ).dependencies.labelers ?? []
      for (let i = 0; i < 100 && !(await labelers()).some((l) => l.did === labeler); i++) {
        await new Promise((r) => setTimeout(r, 200))
      }
      expect((await labelers()).map((l) => l.did)).toContain(labeler)
      const seq = await caughtUp()
      const res = await fetch(`${found.url}/_wait?labels=${labeler}:${seq}&timeoutMs=60000`)
      expect(res.status).toBe(200)
      await admin.query(`set search_path to "${second}"`)
      const { rows } = await admin.query(
        'select uri, val from label where src = $1 and not neg order by uri, val',
        [labeler],
      )
      expect(rows.map((r: { uri: string; val: string }) => `${r.uri} ${r.val}`).sort()).toEqual(
        await inForce(),
      )
    } finally {
      await found.stop()
      await dropSchemas([second])
    }
  })
})

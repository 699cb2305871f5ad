// A community deployment: `openplane start` configured with one curated list indexes the list's
// owner and members only. It starts after the accounts have written a history (so members are
// backfilled), then: members write live while an outsider likes and replies to them; a new
// member is added to the list (backfilled at once); a member is removed (no longer indexed) and
// purged with `openplane purge`. The end state must equal the stock indexer fed the firehose of
// exactly the final members, from seq 0, and the stock AppView on each must answer alike.
import { execFile } from 'node:child_process'
import path from 'node:path'
import { promisify } from 'node:util'
import { decodeAll } from '@atproto/lex-cbor'
import { createPgDb, type Db } from '@openplane/db'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import WebSocket from 'ws'
import { recountSchemaCounters } from '../harness/counters.ts'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { StockIndexer } from '../harness/fuzz/stock.ts'
import { formatTableDiff, INDEXED_TABLES, tableDiffs } from '../harness/indexer.ts'
import {
  appViewEnvFor,
  spawnAppView,
  spawnDataplane,
  waitForSeq,
  type Child,
} from '../harness/processes.ts'
import { createUser, type Did } from '../harness/seed.ts'
import { dropSchemas, startStockNetwork, type StockNetwork } from '../harness/stock-network.ts'

const root = path.resolve(import.meta.dirname, '../..')
const run = promisify(execFile)

type Names = 'curator' | 'alice' | 'bob' | 'carol' | 'dan' | 'erin'

/** Every frame of the PDS's firehose from the start up to `head`, with the account it is about. */
async function firehoseFrames(
  pdsUrl: string,
  head: number,
): Promise<{ seq: number; did: string; bytes: Uint8Array }[]> {
  const url = `${pdsUrl.replace(/^http/, 'ws')}/xrpc/com.atproto.sync.subscribeRepos?cursor=0`
  const ws = new WebSocket(url)
  const frames: { seq: number; did: string; bytes: Uint8Array }[] = []
  await new Promise<void>((resolve, reject) => {
    ws.on('message', (data: Buffer) => {
      const bytes = new Uint8Array(data)
      const [, body] = [...decodeAll(bytes)] as [
        unknown,
        { seq: number; repo?: string; did?: string },
      ]
      frames.push({ seq: body.seq, did: body.repo ?? body.did ?? '', bytes })
      if (body.seq >= head) resolve()
    })
    ws.on('error', reject)
  })
  ws.close()
  return frames
}

/** A counter row (post_agg, profile_agg) whose counts are all zero. */
function zeroCounts(row: string): boolean {
  const values = Object.entries(JSON.parse(row) as Record<string, unknown>)
  const counts = values.filter(([k]) => k.endsWith('Count'))
  return counts.length > 0 && counts.every(([, v]) => v === 0)
}

describe('community mode', () => {
  let net: StockNetwork
  let dataplane: Child
  let db: Db
  let d: Record<Names, Did>
  let list: Awaited<ReturnType<StockNetwork['sc']['createList']>>
  let dataplaneEnv: Record<string, string>
  const schema = uniqueName('op_comm')

  const head = async () => (await net.network.pds.ctx.sequencer.curr()) ?? 0
  /** Everything the PDS sequenced is applied by our indexer. */
  const caughtUp = async () => {
    await net.network.processAll()
    await waitForSeq(dataplane.url, await head())
  }
  /** Waits until these repos are backfilled and nothing else is pending. */
  async function backfilled(dids: string[]): Promise<void> {
    const deadline = Date.now() + 60_000
    for (;;) {
      const rows = await db.db.selectFrom('openplane_repo').select(['did', 'state']).execute()
      const done = new Set(rows.filter((r) => r.state === 'done').map((r) => r.did))
      const busy = rows.some((r) => r.state === 'pending' || r.state === 'purge')
      if (!busy && dids.every((did) => done.has(did))) return
      if (Date.now() > deadline) throw new Error(`not backfilled: ${JSON.stringify(rows)}`)
      await new Promise((r) => setTimeout(r, 200))
    }
  }
  const authorsOf = async (table: 'record' | 'actor') =>
    new Set((await db.db.selectFrom(table).select('did').execute()).map((r) => r.did))
  const postTexts = async (did: string) =>
    (await db.db.selectFrom('post').select('text').where('creator', '=', did).execute())
      .map((r) => r.text)
      .sort()

  beforeAll(async () => {
    net = await startStockNetwork()
    const { sc, network } = net
    const names: Names[] = ['curator', 'alice', 'bob', 'carol', 'dan', 'erin']
    d = {} as Record<Names, Did>
    for (const name of names) d[name] = await createUser(sc, name)
    // A history written before openplane starts.
    for (const name of names) {
      await sc.post(d[name], `${name} first`)
      await sc.post(d[name], `${name} second`)
    }
    const first = (name: Names) => sc.posts[d[name]]![0]!.ref
    for (const [a, b] of [
      ['alice', 'bob'],
      ['alice', 'carol'],
      ['alice', 'dan'],
      ['bob', 'alice'],
      ['carol', 'alice'],
      ['carol', 'erin'],
      ['dan', 'alice'],
      ['erin', 'alice'],
    ] as const) {
      await sc.follow(d[a], d[b])
    }
    for (const [a, b] of [
      ['dan', 'alice'],
      ['alice', 'bob'],
      ['bob', 'alice'],
      ['carol', 'erin'],
      ['erin', 'carol'],
    ] as const) {
      await sc.like(d[a], first(b))
    }
    await sc.repost(d.carol, first('bob'))
    await sc.reply(d.dan, first('alice'), first('alice'), 'dan replies to alice')
    await network.processAll()
    await sc.reply(d.alice, first('dan'), first('dan'), 'alice replies to dan')
    list = await sc.createList(d.curator, 'our community', 'curate')
    for (const member of ['alice', 'bob', 'carol'] as const)
      await sc.addToList(d.curator, d[member], list)
    await network.processAll()

    dataplaneEnv = { DATAPLANE_COMMUNITY_LISTS: list.uriStr, DATAPLANE_BACKFILL_CONCURRENCY: '4' }
    dataplane = await spawnDataplane({
      pgUrl: PG_URL,
      schema,
      plcUrl: network.plc.url,
      pdsUrl: network.pds.url,
      extra: dataplaneEnv,
    })
    db = createPgDb({ url: PG_URL, schema })
    await backfilled([d.curator, d.alice, d.bob, d.carol])
  }, 180_000)

  afterAll(async () => {
    await dataplane?.stop()
    await db?.close()
    await net?.close()
    await dropSchemas([schema])
  })

  it('indexes the list owner and members only, backfilled from their repos', async () => {
    const members = [d.curator, d.alice, d.bob, d.carol]
    expect([...(await authorsOf('record'))].sort()).toEqual([...members].sort())
    expect([...(await authorsOf('actor'))].sort()).toEqual([...members].sort())
    expect(await postTexts(d.alice)).toEqual([
      'alice first',
      'alice replies to dan',
      'alice second',
    ])
    // Outsiders' likes and replies are not counted: counters are true to what is indexed.
    const alicePost = net.sc.posts[d.alice]![0]!.ref.uriStr
    const agg = await db.db
      .selectFrom('post_agg')
      .selectAll()
      .where('uri', '=', alicePost)
      .executeTakeFirstOrThrow()
    expect({ likes: agg.likeCount, replies: agg.replyCount }).toEqual({ likes: 1, replies: 0 })
  })

  it('indexes members live and skips outsiders', async () => {
    const { sc } = net
    const post = await sc.post(d.alice, 'alice live')
    await sc.like(d.dan, post.ref)
    await sc.like(d.carol, post.ref)
    await sc.post(d.dan, 'dan live')
    await caughtUp()
    expect(await postTexts(d.alice)).toContain('alice live')
    expect(await postTexts(d.dan)).toEqual([])
    const agg = await db.db
      .selectFrom('post_agg')
      .select('likeCount')
      .where('uri', '=', post.ref.uriStr)
      .executeTakeFirstOrThrow()
    expect(agg.likeCount).toBe(1)
  })

  it('backfills an account added to the list', async () => {
    expect(await postTexts(d.erin)).toEqual([])
    await net.sc.addToList(d.curator, d.erin, list)
    await caughtUp()
    await backfilled([d.erin])
    expect(await postTexts(d.erin)).toEqual(['erin first', 'erin second'])
    await net.sc.post(d.erin, 'erin live')
    await caughtUp()
    expect(await postTexts(d.erin)).toContain('erin live')
  })

  it('stops indexing an account removed from the list, and purges it', async () => {
    await net.sc.rmFromList(d.curator, d.bob, list)
    await caughtUp()
    await net.sc.post(d.bob, 'bob after leaving')
    await caughtUp()
    const before = await postTexts(d.bob)
    expect(before).toEqual(['bob first', 'bob second'])

    const { stdout } = await run(process.execPath, ['packages/cli/src/main.ts', 'purge'], {
      cwd: root,
      env: {
        ...process.env,
        DB_POSTGRES_URL: PG_URL,
        DB_POSTGRES_SCHEMA: schema,
        LOG_LEVEL: 'warn',
        ...dataplaneEnv,
      },
    })
    expect(stdout).toContain('1 accounts outside the community')
    expect(stdout).toContain(d.bob)
    expect(await postTexts(d.bob)).toEqual([])
    expect((await authorsOf('record')).has(d.bob)).toBe(false)
    expect((await authorsOf('actor')).has(d.bob)).toBe(false)
  })

  describe('against the stock fed the final members firehose', () => {
    let stock: StockIndexer
    let ourAppView: Child
    let stockAppView: Child
    beforeAll(async () => {
      const { network } = net
      const members = new Set([d.curator, d.alice, d.carol, d.erin])
      const frames = (await firehoseFrames(network.pds.url, await head())).filter((f) =>
        members.has(f.did as Did),
      )
      stock = await StockIndexer.start(network.plc.url, network.pds.url)
      await stock.play(frames)
      await recountSchemaCounters(stock.schema)
      ;[ourAppView, stockAppView] = await Promise.all([
        spawnAppView(appViewEnvFor(network, dataplane.url)),
        spawnAppView({ ...appViewEnvFor(network, stock.url), httpVersion: '1.1' }),
      ])
    }, 180_000)
    afterAll(async () => {
      await ourAppView?.stop()
      await stockAppView?.stop()
      await stock?.close()
    })

    it.each(INDEXED_TABLES)('%s', async (table) => {
      // Set aside: when each side indexed a row, and notifications addressed to the purged
      // account (the stock, never having indexed it, still notifies it of members' likes).
      const diffs = await tableDiffs(stock.schema, schema, [table], (t, row) =>
        t === 'notification' && row.did === d.bob ? Object.keys(row) : ['indexedAt'],
      )
      const rest = diffs
        .map((diff) => ({
          ...diff,
          onlyStock: diff.onlyStock.filter((r) => !r.includes('"did":"<set aside>"')),
          // A count row at zero answers as no count row: the purge took what it counted.
          onlyOurs: diff.onlyOurs.filter((r) => !zeroCounts(r)),
        }))
        .filter((diff) => diff.onlyStock.length || diff.onlyOurs.length)
      expect(rest.map((diff) => formatTableDiff(diff, stock.schema, schema))).toEqual([])
    })

    /** GETs an XRPC method from both AppViews; the same status and JSON but for index times. */
    async function same(nsid: string, params: Record<string, string>, viewer?: Did) {
      const answer = async (base: string) => {
        const url = new URL(`/xrpc/${nsid}`, base)
        for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v)
        const headers = viewer ? await net.network.serviceHeaders(viewer, nsid) : {}
        const res = await fetch(url, { headers })
        const text = (await res.text()).replace(/"indexedAt":"[^"]*"/g, '"indexedAt":"<set aside>"')
        return { status: res.status, body: JSON.parse(text) as unknown }
      }
      const [theirs, ours] = await Promise.all([answer(stockAppView.url), answer(ourAppView.url)])
      expect({ nsid, params, viewer, ...ours }).toEqual({ nsid, params, viewer, ...theirs })
    }

    it("serves members' profiles, feeds and threads as the stock dataplane does", async () => {
      const posts = net.sc.posts
      for (const viewer of [undefined, d.alice, d.carol]) {
        for (const name of ['curator', 'alice', 'bob', 'carol', 'dan', 'erin'] as const) {
          await same('app.bsky.actor.getProfile', { actor: d[name] }, viewer)
          await same('app.bsky.feed.getAuthorFeed', { actor: d[name] }, viewer)
        }
        for (const name of ['alice', 'carol', 'erin'] as const) {
          for (const post of posts[d[name]]!) {
            await same('app.bsky.feed.getPostThread', { uri: post.ref.uriStr }, viewer)
          }
        }
        await same('app.bsky.graph.getFollowers', { actor: d.alice }, viewer)
        await same('app.bsky.graph.getList', { list: list.uriStr }, viewer)
      }
      for (const viewer of [d.alice, d.carol, d.erin]) {
        await same('app.bsky.feed.getTimeline', {}, viewer)
      }
    })
  })
})

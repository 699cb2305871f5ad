// Full-text search (DATAPLANE_SEARCH=fulltext, the default) through the stock AppView: the posts
// and actors a person expects for words, stems, phrases, exclusions and the app's operators, newest
// first; taken-down and deleted posts never returned. (Substring mode answers exactly as the stock
// does: tests/compat/appview-endpoints.test.ts and tests/routes/search.test.ts.)
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { appViewDiff, caughtUp } from '../harness/appview-diff.ts'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { appViewEnvFor, spawnAppView, spawnDataplane, type Child } from '../harness/processes.ts'
import { createUser, setProfile, type Did } from '../harness/seed.ts'
import {
  dropSchemas,
  startStockNetwork,
  type DataplaneClient,
  type StockNetwork,
} from '../harness/stock-network.ts'

describe('full-text search through the stock AppView', () => {
  let net: StockNetwork
  let dataplane: Child
  let appview: Child
  let client: DataplaneClient
  const schema = uniqueName('op_search')
  const u = {} as Record<'alice' | 'bob' | 'carol' | 'dan' | 'eve', Did>
  /** Post URIs by name. */
  const p: Record<string, string> = {}

  beforeAll(async () => {
    net = await startStockNetwork()
    const { network, sc } = net
    dataplane = await spawnDataplane({
      pgUrl: PG_URL,
      schema,
      plcUrl: network.plc.url,
      pdsUrl: network.pds.url,
      extra: { DATAPLANE_FIREHOSE_CURSOR: '0' },
    })
    appview = await spawnAppView(appViewEnvFor(network, dataplane.url))
    client = net.clientFor(dataplane.url)
    for (const name of ['alice', 'bob', 'carol', 'dan', 'eve'] as const) {
      u[name] = await createUser(sc, name)
    }
    await setProfile(sc, u.alice, 'Alice Wonder', 'curious')
    await setProfile(sc, u.bob, 'Robert Builder', 'can we fix it')
    await setProfile(sc, u.carol, 'Carol Singer', 'la la la')
    const post = async (
      name: string,
      by: Did,
      text: string,
      extra: Record<string, unknown> = {},
    ) => {
      const facets = extra.facets as never
      const res = await sc.post(by, text, facets, undefined, undefined, { ...extra })
      p[name] = res.ref.uriStr
      return res
    }
    // Posted long ago, and first: the oldest.
    await post('old', u.eve, 'old fox news', { createdAt: '2020-01-01T00:00:00.000Z' })
    const fox = await post('fox', u.alice, 'The quick brown fox jumps over the lazy dog', {
      langs: ['en'],
    })
    await post('running', u.bob, 'Running late again, sorry', { langs: ['en'] })
    await post('german', u.carol, 'Ich laufe jeden Morgen im Park', { langs: ['de'] })
    await post('hashtag', u.dan, 'big cats are cute #caturday')
    await post('fieldtag', u.alice, 'tagged through the field', { tags: ['fieldtag'] })
    await post('link', u.bob, 'read this', {
      embed: {
        $type: 'app.bsky.embed.external',
        external: { uri: 'https://news.example.com/a', title: 't', description: 'd' },
      },
    })
    await post('mention', u.carol, 'hello @alice.test nice fox', {
      facets: [
        {
          index: { byteStart: 6, byteEnd: 17 },
          features: [{ $type: 'app.bsky.richtext.facet#mention', did: u.alice }],
        },
      ],
    })
    const reply = await sc.reply(u.dan, fox.ref, fox.ref, 'what a fox')
    p.reply = reply.ref.uriStr
    const gone = await post('taken', u.eve, 'forbidden fox')
    const deleted = await post('deleted', u.eve, 'deleted fox')
    await sc.deletePost(u.eve, deleted.ref.uri)
    await caughtUp(net, dataplane.url)
    // A takedown through the AppView's admin endpoint, written to our dataplane.
    const res = await appViewDiff(net, () => appview.url).call(
      appview.url,
      'com.atproto.admin.updateSubjectStatus',
      {},
      'admin',
      {
        subject: {
          $type: 'com.atproto.repo.strongRef',
          uri: gone.ref.uriStr,
          cid: gone.ref.cidStr,
        },
        takedown: { applied: true, ref: 'TAKEDOWN-1' },
      },
    )
    expect(res.status).toBe(200)
    // Statistics for the index's document, kept to the ten most common lexemes: searches for a
    // word among them go window by window, the rest (rare) through the index at once; both must
    // answer the table below.
    const admin = new pg.Client({ connectionString: PG_URL })
    await admin.connect()
    try {
      for (let i = 0; ; i++) {
        const { rows } = await admin.query(
          `select 1 from pg_index x join pg_class c on c.oid = x.indexrelid
           join pg_namespace n on n.oid = c.relnamespace
           where n.nspname = $1 and c.relname = 'post_text_search_idx' and x.indisvalid`,
          [schema],
        )
        if (rows.length) break
        if (i > 300) throw new Error('the search index was not built')
        await new Promise((r) => setTimeout(r, 100))
      }
      await admin.query(
        `alter index "${schema}".post_text_search_idx alter column 1 set statistics 1`,
      )
      await admin.query(`analyze "${schema}".post`)
      const { rows } = await admin.query<{ elems: string[] }>(
        `select most_common_elems::text::text[] as elems from pg_stats
         where schemaname = $1 and tablename = 'post_text_search_idx'`,
        [schema],
      )
      common = rows[0]?.elems ?? []
    } finally {
      await admin.end()
    }
  }, 300_000)

  let common: string[] = []

  it('has words of both kinds: common ones, and rare ones answered through the index', () => {
    expect(common).toContain('fox')
    expect(common).not.toContain('laufe')
    expect(common).not.toContain('caturday')
  })

  afterAll(async () => {
    await appview?.stop()
    await dataplane?.stop()
    await net?.close()
    await dropSchemas([schema])
  })

  const xrpc = async (nsid: string, params: Record<string, string>) => {
    const res = await fetch(`${appview.url}/xrpc/${nsid}?${new URLSearchParams(params)}`)
    expect(res.status).toBe(200)
    return (await res.json()) as Record<string, unknown>
  }
  const searchPosts = async (q: string) => {
    const body = await xrpc('app.bsky.feed.searchPosts', { q, limit: '100' })
    return (body.posts as { uri: string }[]).map((post) => post.uri)
  }
  const names = (...keys: string[]) => keys.map((k) => p[k]!)

  it.each([
    // Words, any case, newest first; the taken-down and the deleted post never.
    ['fox', ['reply', 'mention', 'fox', 'old']],
    ['FOX', ['reply', 'mention', 'fox', 'old']],
    // Stems of an English post, and a word as written in a German one.
    ['run', ['running']],
    ['runs', ['running']],
    ['laufe', ['german']],
    ['laufen lang:de', ['german']],
    ['lang:de', ['german']],
    // Phrases in order; exclusions; or.
    ['"brown fox"', ['fox']],
    ['"fox brown"', []],
    ['fox -lazy', ['reply', 'mention', 'old']],
    ['quick -lazy', []],
    ['laufe or running', ['german', 'running']],
    // Hashtags, in the text or the record's tags.
    ['#caturday', ['hashtag']],
    ['#fieldtag', ['fieldtag']],
    ['caturday', ['hashtag']],
    // Accounts: author, mentioned, replied to or mentioned.
    ['fox from:alice.test', ['fox']],
    ['fox from:@alice.test', ['fox']],
    ['fox from:nobody.test', []],
    ['mentions:alice.test', ['mention']],
    ['to:alice.test', ['reply', 'mention']],
    // Time, on sortAt: since inclusive, until exclusive.
    ['fox since:2021-01-01', ['reply', 'mention', 'fox']],
    ['fox until:2021-01-01', ['old']],
    // Linked hosts: an external embed on a subdomain.
    ['domain:example.com', ['link']],
    ['domain:other.org', []],
    ['zebra', []],
  ])('searchPosts %j', async (q, expected) => {
    expect(await searchPosts(q)).toEqual(names(...expected))
  })

  it('searchPosts pages newest first with the cursor', async () => {
    const seen: string[] = []
    let cursor: string | undefined
    for (let i = 0; i < 10; i++) {
      const body = await xrpc('app.bsky.feed.searchPosts', {
        q: 'fox',
        limit: '1',
        ...(cursor ? { cursor } : {}),
      })
      seen.push(...(body.posts as { uri: string }[]).map((post) => post.uri))
      cursor = body.cursor as string | undefined
      if (!cursor) break
    }
    expect(seen).toEqual(names('reply', 'mention', 'fox', 'old'))
  })

  it('never returns a taken-down post, even to a caller below the AppView', async () => {
    const answer = await client.searchPosts({ term: 'forbidden', limit: 10 })
    expect(answer.uris).toEqual([])
  })

  it.each([
    ['ali', 'alice'],
    ['ALI', 'alice'],
    ['@alice', 'alice'],
    ['rob', 'bob'],
    ['builder', 'bob'],
    ['car', 'carol'],
  ] as const)('searchActorsTypeahead %j finds %s first', async (q, who) => {
    const body = await xrpc('app.bsky.actor.searchActorsTypeahead', { q })
    expect((body.actors as { did: string }[])[0]?.did).toBe(u[who])
  })

  it('searchActors finds by display name words and pages by cursor', async () => {
    const body = await xrpc('app.bsky.actor.searchActors', { q: 'singer' })
    expect((body.actors as { did: string }[]).map((a) => a.did)).toEqual([u.carol])
    expect((await xrpc('app.bsky.actor.searchActors', { q: 'zzzz' })).actors).toEqual([])
    // Every handle here ends in .test.
    const first = await client.searchActors({ term: 'test', limit: 1 })
    expect(first.dids).toHaveLength(1)
    expect(first.cursor).toBe('1')
    const second = await client.searchActors({ term: 'test', limit: 1, cursor: first.cursor })
    expect(second.dids).toHaveLength(1)
    expect(second.dids[0]).not.toBe(first.dids[0])
  })
})

// pnpm bench:search — searching posts on one database: the stock's substring search (its own
// dataplane server, @atproto/bsky) and ours, full-text (DATAPLANE_SEARCH=fulltext), over the same
// posts with the same queries, in one run.
//
// The posts are the toolkit's (`postText`: "post by userN: " and 3 to 14 words drawn by Zipf's
// law from a 20,000-word vocabulary), by users drawn uniformly, over 30 days, written straight
// into `post` and `record` (search reads nothing else). Then the search index is built (plain
// CREATE INDEX: its time and size are printed) and the tables analyzed. Queries are one word
// each, as people type them: half drawn as words are used (common ones often), half uniformly
// over the vocabulary (rare ones), each asked for a page of 25 as the AppView asks, one at a time,
// after 20 uncounted warm-up queries per side.
//
//   SEARCH_POSTS          posts (default 1,000,000)
//   SEARCH_USERS          their authors (default 100,000)
//   SEARCH_QUERIES        queries (default 1,000)
//   SEARCH_STOCK_QUERIES  of them, how many the stock is asked (default all: a rare word costs
//                         it a scan of the table)
//   SEARCH_KEEP_SCHEMA    1: keep the schema
//
// Prints per side p50, p99 and max latency and the CPU per query of this process (both servers
// run in it, one side at a time) and of Postgres, then:
//   search: stock p99 <ms> ms, openplane p99 <ms> ms, ratio <x>x
import { performance } from 'node:perf_hooks'
import { BasicHostList, createDataPlaneClient, Database, DataPlaneServer } from '@atproto/bsky'
import { sql } from 'kysely'
import { buildPostSearchIndex, createPgDb, migrateToLatest } from '@openplane/db'
import { createIdentity } from '@openplane/identity'
import { startServer } from '@openplane/server'
import { didFor, postText, Rng, tid, VOCABULARY, wordAt } from '@openplane/sim'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { freePort } from '../harness/processes.ts'
import { dropSchemas } from '../harness/stock-network.ts'
import { quantile } from './open-loop.ts'
import { cpuByName } from './proc.ts'

const POSTS = Number(process.env.SEARCH_POSTS ?? 1_000_000)
const USERS = Number(process.env.SEARCH_USERS ?? 100_000)
const QUERIES = Number(process.env.SEARCH_QUERIES ?? 1000)
const STOCK_QUERIES = Math.min(QUERIES, Number(process.env.SEARCH_STOCK_QUERIES ?? QUERIES))
const PAGE = 25
const WARMUP = 20
const BATCH = 10_000
const DAY = 86_400_000
const log = (...a: unknown[]) => console.log('[bench:search]', ...a)

const schema = uniqueName('bench_search')
const db = createPgDb({ url: PG_URL, schema, poolSize: 4 })

interface Side {
  name: string
  latencies: Float64Array
  /** The slowest queries, slowest first. */
  slowest: { term: string; ms: number; found: number }[]
  found: number
  nodeCpu: number
  pgCpu: number
}

try {
  await migrateToLatest(db)
  await load()
  log('building the search index…')
  const t0 = performance.now()
  await buildPostSearchIndex(db)
  const indexSeconds = (performance.now() - t0) / 1000
  await sql`analyze post`.execute(db.db)
  await sql`analyze record`.execute(db.db)
  const sizes = await sql<{ table: string; index: string }>`
    select pg_size_pretty(pg_total_relation_size('post')) as table,
           pg_size_pretty(pg_relation_size('post_text_search_idx')) as index
  `.execute(db.db)
  log(
    `index built in ${indexSeconds.toFixed(0)} s: ${sizes.rows[0]!.index} (post table with its indexes ${sizes.rows[0]!.table})`,
  )

  const rng = new Rng(42)
  const queries = Array.from({ length: QUERIES + WARMUP }, (_, i) =>
    i % 2 ? VOCABULARY[rng.int(VOCABULARY.length)]! : wordAt(rng.u32() / 2 ** 32),
  )

  const stock = await stockSide(queries.slice(0, STOCK_QUERIES + WARMUP))
  const ours = await ourSide(queries)
  console.log('')
  console.log(
    '| side | queries | with results | p50 ms | p99 ms | max ms | node CPU ms/query | postgres CPU ms/query |',
  )
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
  for (const s of [stock, ours]) console.log(row(s))
  for (const s of [stock, ours]) {
    const slow = s.slowest.map((q) => `${q.term} ${q.ms.toFixed(0)} ms (${q.found})`)
    console.log(`slowest, ${s.name}: ${slow.join(', ')}`)
  }
  // The same queries on both sides, where the stock was asked fewer.
  const shared = ours.latencies.slice(0, stock.latencies.length).sort()
  const ourP99 = quantile(shared, 0.99)
  const stockP99 = quantile(stock.latencies.slice().sort(), 0.99)
  console.log(
    `\nsearch: stock p99 ${stockP99.toFixed(1)} ms, openplane p99 ${ourP99.toFixed(1)} ms, ` +
      `ratio ${(stockP99 / ourP99).toFixed(1)}x`,
  )
} catch (err) {
  console.error(err)
  process.exitCode = 1
} finally {
  await db.close()
  if (process.env.SEARCH_KEEP_SCHEMA === '1') log(`schema kept: ${schema}`)
  else await dropSchemas([schema])
}

/** The posts, their `record` rows and their authors, in batches of unnested arrays. */
async function load(): Promise<void> {
  const rng = new Rng(7)
  const start = Date.parse('2026-01-01T00:00:00.000Z')
  const t0 = performance.now()
  for (let from = 0; from < POSTS; from += BATCH) {
    const n = Math.min(BATCH, POSTS - from)
    const uris: string[] = []
    const cids: string[] = []
    const creators: string[] = []
    const texts: string[] = []
    const times: string[] = []
    for (let i = 0; i < n; i++) {
      const user = rng.int(USERS)
      const did = didFor(user)
      const at = start + Math.floor(((from + i) / POSTS) * 30 * DAY)
      creators.push(did)
      uris.push(`at://${did}/app.bsky.feed.post/${tid(at * 1000, from + i)}`)
      cids.push(`bafyreib${(from + i).toString(36).padStart(12, '0')}`)
      texts.push(postText(rng, user))
      times.push(new Date(at).toISOString())
    }
    await sql`
      insert into post (uri, cid, creator, text, "createdAt", "indexedAt", langs)
      select u, c, d, t, a, a, '["en"]'::jsonb
      from unnest(${uris}::text[], ${cids}::text[], ${creators}::text[], ${texts}::text[],
        ${times}::text[]) as x(u, c, d, t, a)
    `.execute(db.db)
    await sql`
      insert into record (uri, cid, did, json, "indexedAt")
      select u, c, d, '{}', a
      from unnest(${uris}::text[], ${cids}::text[], ${creators}::text[], ${times}::text[])
        as x(u, c, d, a)
    `.execute(db.db)
    if ((from / BATCH) % 20 === 0) log(`  ${from + n} posts written`)
  }
  const dids = Array.from({ length: USERS }, (_, i) => didFor(i))
  await sql`
    insert into actor (did, handle, "indexedAt")
    select d, 'user' || i || '.sim.test', '2026-01-01T00:00:00.000Z'
    from unnest(${dids}::text[]) with ordinality as x(d, i)
  `.execute(db.db)
  log(
    `${POSTS} posts by ${USERS} users written in ${((performance.now() - t0) / 1000).toFixed(0)} s`,
  )
}

async function stockSide(queries: string[]): Promise<Side> {
  const stockDb = new Database({ url: PG_URL, schema, poolSize: 4 })
  const port = await freePort()
  const server = await DataPlaneServer.create(stockDb, port)
  const client = createDataPlaneClient(new BasicHostList([`http://127.0.0.1:${port}`]), {
    httpVersion: '1.1',
  })
  try {
    log(`stock (substring): ${queries.length - WARMUP} queries…`)
    return await measure('stock (substring)', queries, async (term) => {
      const res = await client.searchPosts({ term, limit: PAGE })
      return res.uris.length
    })
  } finally {
    await server.destroy()
    await stockDb.close()
  }
}

async function ourSide(queries: string[]): Promise<Side> {
  const reads = createPgDb({ url: PG_URL, schema, poolSize: 4, preparedStatements: 200 })
  const server = await startServer({
    host: '127.0.0.1',
    port: 0,
    ctx: {
      db: reads.db,
      identity: createIdentity({ plcUrl: 'http://127.0.0.1:1' }),
      search: 'fulltext',
    },
  })
  const client = createDataPlaneClient(new BasicHostList([server.url]), { httpVersion: '2' })
  try {
    log(`openplane (full-text): ${queries.length - WARMUP} queries…`)
    return await measure('openplane (full-text)', queries, async (term) => {
      const res = await client.searchPosts({ term, limit: PAGE })
      return res.uris.length
    })
  } finally {
    await server.close()
    await reads.close()
  }
}

/** Warm-up, then each query alone, its latency as the caller sees it. */
async function measure(
  name: string,
  queries: string[],
  ask: (term: string) => Promise<number>,
): Promise<Side> {
  for (const q of queries.slice(0, WARMUP)) await ask(q)
  const timed = queries.slice(WARMUP)
  const latencies = new Float64Array(timed.length)
  let found = 0
  const each: { term: string; ms: number; found: number }[] = []
  const cpu0 = process.cpuUsage()
  const pg0 = cpuByName('postgres')
  for (const [i, q] of timed.entries()) {
    const t = performance.now()
    const n = await ask(q)
    if (n > 0) found++
    latencies[i] = performance.now() - t
    each.push({ term: q, ms: latencies[i]!, found: n })
  }
  const cpu = process.cpuUsage(cpu0)
  return {
    name,
    latencies,
    slowest: each.sort((a, b) => b.ms - a.ms).slice(0, 5),
    found,
    nodeCpu: (cpu.user + cpu.system) / 1e6,
    pgCpu: cpuByName('postgres') - pg0,
  }
}

function row(s: Side): string {
  const sorted = s.latencies.slice().sort()
  const n = sorted.length
  if (!n) return `| ${s.name} | 0 | | | | | | |`
  const ms = (seconds: number) => ((seconds / n) * 1000).toFixed(2)
  return (
    `| ${s.name} | ${n} | ${s.found} | ${quantile(sorted, 0.5).toFixed(1)} | ` +
    `${quantile(sorted, 0.99).toFixed(1)} | ${sorted[n - 1]!.toFixed(1)} | ${ms(s.nodeCpu)} | ` +
    `${ms(s.pgCpu)} |`
  )
}

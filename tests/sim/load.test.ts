// Bulk loading: a small userbase COPYed into a fresh schema holds exactly what the generator made,
// and the schema's catalog is still the stock's after the indexes were dropped and rebuilt.
import { BasicHostList, createDataPlaneClient, Database, DataPlaneServer } from '@atproto/bsky'
import { createPgDb, migrateToLatest } from '@openplane/db'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  didFor,
  followersOf,
  followGraph,
  loadUserbase,
  parseUserbaseParams,
  totalFollows,
  type LoadReport,
} from '@openplane/sim'
import { readCatalog } from '../db/catalog.ts'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { freePort } from '../harness/processes.ts'

const N = 2000
const params = parseUserbaseParams({
  name: 'load test',
  num_users: N,
  max_active_user_id: 200,
  follower_density: 5,
  seed: 3,
  existing_posts: {
    days: 3,
    tiers: [
      { max_followers: 100, posts_per_day: 1 },
      { max_followers: 100000, posts_per_day: 4 },
    ],
  },
})
const loaded = uniqueName('sim_load')
const fresh = uniqueName('sim_fresh')
let pool: pg.Pool
let report: LoadReport

const count = async (sql: string, args: unknown[] = []): Promise<number> =>
  Number((await pool.query<{ n: string }>(sql, args)).rows[0]?.n)

beforeAll(async () => {
  pool = new pg.Pool({ connectionString: PG_URL, max: 2 })
  report = await loadUserbase(params, { url: PG_URL, schema: loaded })
})

afterAll(async () => {
  for (const schema of [loaded, fresh]) await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
  await pool.end()
})

describe('load-userbase', () => {
  it('loads every follow, with counters that match the generator', async () => {
    const follows = totalFollows(N, 5)
    expect(report.counts.follows).toBe(follows)
    expect(await count(`SELECT count(*) AS n FROM ${loaded}.follow`)).toBe(follows)
    expect(await count(`SELECT count(*) AS n FROM ${loaded}.actor`)).toBe(N)
    expect(await count(`SELECT count(*) AS n FROM ${loaded}.profile`)).toBe(N)

    const agg = `SELECT "followersCount" AS n FROM ${loaded}.profile_agg WHERE did = $1`
    expect(await count(agg, [didFor(1)])).toBe(N - 1)
    expect(await count(agg, [didFor(100)])).toBe(followersOf(100, N, 5))
    // Counters agree with the rows, as the stock's recount would leave them.
    const mismatched = await count(`
      SELECT count(*) AS n FROM ${loaded}.profile_agg a
       WHERE a."followersCount" <> (SELECT count(*) FROM ${loaded}.follow f WHERE f."subjectDid" = a.did)
          OR a."followsCount" <> (SELECT count(*) FROM ${loaded}.follow f WHERE f.creator = a.did)
          OR a."postsCount" <> (SELECT count(*) FROM ${loaded}.post p WHERE p.creator = a.did)`)
    expect(mismatched).toBe(0)

    // The followers of user 10 are the generator's.
    let expected: number[] = []
    for (const { subject, followers } of followGraph(params)) {
      if (subject === 10) {
        expected = [...followers].sort((a, b) => a - b)
        break
      }
    }
    const { rows } = await pool.query<{ creator: string }>(
      `SELECT creator FROM ${loaded}.follow WHERE "subjectDid" = $1`,
      [didFor(10)],
    )
    const byDid = new Map(expected.map((id) => [didFor(id), id]))
    expect(rows.map((r) => byDid.get(r.creator)).sort((a, b) => a! - b!)).toEqual(expected)
  })

  it('writes records, posts and feed items as the stock indexer would', async () => {
    const posts = report.counts.posts
    expect(posts).toBeGreaterThan(100)
    expect(await count(`SELECT count(*) AS n FROM ${loaded}.post`)).toBe(posts)
    expect(await count(`SELECT count(*) AS n FROM ${loaded}.feed_item`)).toBe(posts)
    expect(await count(`SELECT count(*) AS n FROM ${loaded}.record`)).toBe(
      N + report.counts.follows + posts,
    )
    const { rows } = await pool.query<{ uri: string; json: string; subject: string }>(
      `SELECT r.uri, r.json, f."subjectDid" AS subject FROM ${loaded}.record r
         JOIN ${loaded}.follow f ON f.uri = r.uri AND f.cid = r.cid LIMIT 1`,
    )
    const row = rows[0]!
    expect(row.uri).toMatch(/^at:\/\/did:plc:[a-z2-7]{24}\/app\.bsky\.graph\.follow\/[2-7a-z]{13}$/)
    expect(JSON.parse(row.json)).toMatchObject({
      $type: 'app.bsky.graph.follow',
      subject: row.subject,
    })
    const handle = await pool.query<{ handle: string }>(
      `SELECT handle FROM ${loaded}.actor WHERE did = $1`,
      [didFor(42)],
    )
    expect(handle.rows[0]?.handle).toBe('user42.sim.test')
    expect(report.bytesPerFollow).toBeGreaterThan(100)
  })

  it('is served by the stock dataplane: followers, timelines, profiles', async () => {
    const stockDb = new Database({ url: PG_URL, schema: loaded, poolSize: 2 })
    const port = await freePort()
    const server = await DataPlaneServer.create(stockDb, port)
    try {
      const stock = createDataPlaneClient(new BasicHostList([`http://127.0.0.1:${port}`]), {
        httpVersion: '1.1',
      })
      // Every follower of user 100, page by page, in the stock's (sortAt, cid) order.
      const followers: string[] = []
      let cursor = ''
      do {
        const page = await stock.getFollowers({ actorDid: didFor(100), limit: 50, cursor })
        followers.push(...page.followers.map((f) => f.actorDid))
        cursor = page.cursor
      } while (cursor)
      expect(followers).toHaveLength(followersOf(100, N, 5))
      expect(new Set(followers).size).toBe(followers.length)

      // User 1500 follows users 1..5 (everyone does), who have posts: its timeline has them.
      const timeline = await stock.getTimeline({ actorDid: didFor(1500), limit: 30 })
      expect(timeline.items).toHaveLength(30)
      const authors = new Set(timeline.items.map((i) => i.uri.split('/')[2]))
      expect(authors.has(didFor(1))).toBe(true)

      const actors = await stock.getActors({ dids: [didFor(7)] })
      expect(actors.actors[0]?.handle).toBe('user7.sim.test')
      const counts = await stock.getCountsForUsers({ dids: [didFor(1)] })
      expect(Number(counts.followers[0])).toBe(N - 1)
    } finally {
      await server.destroy()
      await stockDb.close()
    }
  })

  it('leaves the catalog exactly as our migrations make it', async () => {
    const db = createPgDb({ url: PG_URL, schema: fresh, poolSize: 1 })
    try {
      await migrateToLatest(db)
    } finally {
      await db.close()
    }
    expect(await readCatalog(pool, loaded, [])).toEqual(await readCatalog(pool, fresh, []))
  })

  it('refuses a schema that already has a userbase', async () => {
    await expect(loadUserbase(params, { url: PG_URL, schema: loaded })).rejects.toThrow(
      `schema "${loaded}" already has ${N} actors`,
    )
  })
})

// Full-text search for one common word walks each window of time newest first and stops at the
// page (search-fulltext.ts, WALK_ROWS); every other query finds each window's matches whole first.
// A word of middling share skips the windows it is not expected to fill. Too few posts make
// every word rare (answered through the index at once), so this test writes 100,000 posts
// straight into Postgres and compares each path's pages with the matches in order.
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildPostSearchIndex, createPgDb, migrateToLatest, type Db } from '@openplane/db'
import { searchPostsFulltext } from '../../packages/server/src/routes/util/search-fulltext.ts'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { dropSchemas } from '../harness/stock-network.ts'

const POSTS = 100_000
const schema = uniqueName('op_search_walk')
let db: Db

/** Every match of `where`, newest first: what the pages must hold, in order. */
async function expected(where: string): Promise<string[]> {
  const { rows } = await sql<{ uri: string }>`
    select uri from post where ${sql.raw(where)} order by "sortAt" desc, cid desc
  `.execute(db.db)
  return rows.map((r) => r.uri)
}

/** The first `pages` pages of a search, their URIs in order. */
async function pages(term: string, count: number, limit = 25): Promise<string[]> {
  const out: string[] = []
  let cursor: string | undefined
  for (let i = 0; i < count; i++) {
    const page = await searchPostsFulltext(db.db, { term, limit, cursor })
    out.push(...page.results)
    if (!page.cursor) break
    cursor = page.cursor
  }
  return out
}

describe('full-text search over many posts', () => {
  beforeAll(async () => {
    db = createPgDb({ url: PG_URL, schema, poolSize: 2 })
    await migrateToLatest(db)
    // A post a minute back from 2026-02-01: one in eight says "zebra", one in 30 "gnu", one in
    // 400 "okapi"; every one says "post" and a word of its own.
    await sql`
      insert into post (uri, cid, creator, text, "createdAt", "indexedAt", langs)
      select 'at://did:plc:u' || (i % 500) || '/app.bsky.feed.post/' || lpad(i::text, 8, '0'),
        'bafy' || i, 'did:plc:u' || (i % 500),
        'post w' || i || case when i % 8 = 0 then ' zebra' else '' end
          || case when i % 30 = 7 then ' gnu' else '' end
          || case when i % 400 = 3 then ' okapi' else '' end,
        t, t, '["en"]'::jsonb
      from generate_series(1, ${POSTS}) i,
        lateral (select to_char(timestamptz '2026-02-01T00:00:00Z' - i * interval '1 minute',
          'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') t) x
    `.execute(db.db)
    await buildPostSearchIndex(db)
    await sql`analyze post`.execute(db.db)
  }, 120_000)
  afterAll(async () => {
    await db?.close()
    await dropSchemas([schema])
  })

  it('walks a common word by time, page after page, in the order of its matches', async () => {
    const all = await expected(`text like '% zebra%'`)
    expect(all.length).toBe(POSTS / 8)
    // Ten pages reach back past the first hour, the day and into the week's window.
    expect(await pages('zebra', 10)).toEqual(all.slice(0, 250))
    expect(await pages('zebra', 2, 100)).toEqual(all.slice(0, 200))
  })

  it('skips the windows a word of middling share cannot fill, and pages on from there', async () => {
    // 3,333 matches: not rare; a page of 50 expected within 1,500 posts: not walked. The ten
    // minutes, the hour and the day hold too few of them; the week's window is the first read.
    const gnu = await expected(`text like '% gnu%'`)
    expect(gnu.length).toBe(Math.floor(POSTS / 30) + (POSTS % 30 >= 7 ? 1 : 0))
    expect(await pages('gnu', 5, 50)).toEqual(gnu.slice(0, 250))
  })

  it('answers two common words window by window, and a rare word through the index', async () => {
    // Both words common: their share bounds the matches, but is not the query's own.
    const both = await expected(`text like '% zebra%'`)
    expect(await pages('zebra post', 10)).toEqual(both.slice(0, 250))
    const okapi = await expected(`text like '% okapi%'`)
    expect(okapi.length).toBe(POSTS / 400)
    expect(await pages('okapi', 10)).toEqual(okapi)
  })
})

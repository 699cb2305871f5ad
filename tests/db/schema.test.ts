// @openplane/db against the stock: our migrations must produce the stock's catalog exactly, adopt a
// stock-migrated schema in place, refuse one of another stock version, and run on PGlite too.
import { randomInt } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { Database as StockDatabase } from '@atproto/bsky'
import {
  createPgDb,
  createPgliteDb,
  migrateToLatest,
  PINNED_STOCK_MIGRATION,
  type Db,
  type MigrateResult,
} from '@openplane/db'
import { sql } from 'kysely'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { readCatalog } from './catalog.ts'

const url = process.env.OPENPLANE_TEST_PG_URL ?? 'postgresql://postgres@127.0.0.1:5432/test'
const STOCK_BOOKKEEPING = ['kysely_migration', 'kysely_migration_lock']
const OUR_BOOKKEEPING = ['openplane_migration', 'openplane_migration_lock']
// Sequences too: their catalog rows are named after themselves, not their tables.
const OUR_TABLES = [
  'openplane_cursor',
  'openplane_actor_id',
  'openplane_actor_id_id_seq',
  'openplane_graph_snapshot',
  'openplane_graph_snapshot_id_seq',
  'openplane_graph_snapshot_chunk',
  'openplane_repo',
  'openplane_stream_cursor',
  'openplane_held_event',
  'openplane_held_event_id_seq',
  'openplane_published_event',
  // Full-text search's document (DATAPLANE_SEARCH=fulltext).
  'function openplane_search_config(langs jsonb)',
  'function openplane_post_document(body text, langs jsonb)',
  'function openplane_word_query(word text)',
  'function openplane_phrase_query(phrase text)',
]

const created: string[] = []
const open: Db[] = []
let admin: pg.Pool

/** A fresh schema name; letters only, since the stock accepts nothing else. */
function newSchema(): string {
  const letters = Array.from({ length: 10 }, () => String.fromCharCode(97 + randomInt(26)))
  const schema = `op_test_${letters.join('')}`
  created.push(schema)
  return schema
}

async function stockMigrate(schema: string): Promise<StockDatabase> {
  const stock = new StockDatabase({ url, schema, poolSize: 2 })
  await stock.migrateToLatestOrThrow()
  return stock
}

function ours(schema: string): Db {
  const db = createPgDb({ url, schema, poolSize: 2 })
  open.push(db)
  return db
}

// One fresh schema migrated by us, shared by the tests that compare against it.
let fresh: Promise<{ schema: string; result: MigrateResult }> | undefined
function freshOurs() {
  fresh ??= (async () => {
    const schema = newSchema()
    return { schema, result: await migrateToLatest(ours(schema)) }
  })()
  return fresh
}

async function tableExists(schema: string, table: string): Promise<boolean> {
  const { rows } = await admin.query(
    'SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = $2',
    [schema, table],
  )
  return rows.length > 0
}

beforeAll(() => {
  admin = new pg.Pool({ connectionString: url, max: 2 })
})

afterAll(async () => {
  await Promise.all(open.map((db) => db.close()))
  for (const schema of created) await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
  await admin.end()
})

describe('@openplane/db schema', () => {
  it('creates exactly the stock catalog, plus only our additive tables', async () => {
    const stockSchema = newSchema()
    await (await stockMigrate(stockSchema)).close()
    const { schema: ourSchema, result } = await freshOurs()
    expect(result).toEqual({
      adopted: false,
      applied: [
        '0001-stock-schema',
        '0002-openplane-tables',
        '0003-actor-ids',
        '0004-repo-backfill',
        '0005-repo-queue',
        '0006-stream-cursor',
        '0007-repo-resync',
        '0008-cursor-event-time',
        '0009-post-search',
        '0010-published-events',
      ],
    })

    const stock = await readCatalog(admin, stockSchema, STOCK_BOOKKEEPING)
    const mine = await readCatalog(admin, ourSchema, [...OUR_BOOKKEEPING, ...OUR_TABLES])
    expect(stock.relations.length).toBeGreaterThan(50)
    expect(stock.views.map((v) => v.name)).toEqual(['algo_whats_hot_view'])
    expect(mine).toEqual(stock)

    // Seed data the stock's view depends on.
    const params = 'SELECT name, value FROM "%s".view_param ORDER BY name'
    const stockParams = await admin.query(params.replace('%s', stockSchema))
    const ourParams = await admin.query(params.replace('%s', ourSchema))
    expect(ourParams.rows).toEqual(stockParams.rows)
    expect(ourParams.rows).toHaveLength(2)

    expect(await tableExists(ourSchema, 'openplane_cursor')).toBe(true)
    expect(await migrateToLatest(ours(ourSchema))).toEqual({ adopted: false, applied: [] })
  })

  it('adopts a stock-migrated schema in place and runs only our additive migrations', async () => {
    const schema = newSchema()
    const stock = await stockMigrate(schema)
    const indexedAt = '2025-01-02T03:04:05.000Z'
    await stock.db
      .insertInto('actor')
      .values({ did: 'did:plc:alice', handle: 'alice.test', indexedAt })
      .execute()
    await stock.db
      .insertInto('post')
      .values({
        uri: 'at://did:plc:alice/app.bsky.feed.post/1',
        cid: 'bafypost',
        creator: 'did:plc:alice',
        text: 'hello',
        createdAt: '2025-01-01T00:00:00.000Z',
        indexedAt,
      })
      .execute()
    await stock.close()

    const db = ours(schema)
    expect(await migrateToLatest(db)).toEqual({
      adopted: true,
      applied: [
        '0002-openplane-tables',
        '0003-actor-ids',
        '0004-repo-backfill',
        '0005-repo-queue',
        '0006-stream-cursor',
        '0007-repo-resync',
        '0008-cursor-event-time',
        '0009-post-search',
        '0010-published-events',
      ],
    })

    const actors = await db.db.selectFrom('actor').select(['did', 'handle']).execute()
    expect(actors).toEqual([{ did: 'did:plc:alice', handle: 'alice.test' }])
    const post = await db.db.selectFrom('post').select(['text', 'sortAt']).executeTakeFirstOrThrow()
    expect(post).toEqual({ text: 'hello', sortAt: '2025-01-01T00:00:00.000Z' })

    await db.db
      .insertInto('openplane_cursor')
      .values({ source: 'wss://relay.test', seq: 42 })
      .execute()
    const cursor = await db.db.selectFrom('openplane_cursor').selectAll().executeTakeFirstOrThrow()
    expect(cursor.seq).toBe(42)
    expect(cursor.updatedAt).toBeInstanceOf(Date)

    const names = async (table: string) =>
      (await admin.query(`SELECT name FROM "${schema}".${table} ORDER BY name`)).rows.map(
        (r: { name: string }) => r.name,
      )
    expect(await names('openplane_migration')).toEqual([
      '0001-stock-schema',
      '0002-openplane-tables',
      '0003-actor-ids',
      '0004-repo-backfill',
      '0005-repo-queue',
      '0006-stream-cursor',
      '0007-repo-resync',
      '0008-cursor-event-time',
      '0009-post-search',
      '0010-published-events',
    ])
    const stockNames = await names('kysely_migration')
    expect(stockNames).toHaveLength(61)
    expect(stockNames.at(-1)).toBe(PINNED_STOCK_MIGRATION)

    expect(await migrateToLatest(db)).toEqual({ adopted: false, applied: [] })
    expect(await db.db.selectFrom('actor').select('did').execute()).toHaveLength(1)

    // Adopted and fresh end up identical, additive tables included.
    const adopted = await readCatalog(admin, schema, [...STOCK_BOOKKEEPING, ...OUR_BOOKKEEPING])
    const ourSchema = (await freshOurs()).schema
    expect(adopted).toEqual(await readCatalog(admin, ourSchema, OUR_BOOKKEEPING))
  })

  it('refuses a schema migrated by an older or newer stock version', async () => {
    const schema = newSchema()
    await (await stockMigrate(schema)).close()
    const db = ours(schema)
    const migrations = `"${schema}".kysely_migration`

    await admin.query(`DELETE FROM ${migrations} WHERE name = $1`, [PINNED_STOCK_MIGRATION])
    await expect(migrateToLatest(db)).rejects.toThrow(
      `its latest stock migration is _20260827T200000000Z, expected ${PINNED_STOCK_MIGRATION}`,
    )

    await admin.query(`INSERT INTO ${migrations} (name, timestamp) VALUES ($1, $2), ($3, $2)`, [
      PINNED_STOCK_MIGRATION,
      new Date().toISOString(),
      '_20270101T000000000Z',
    ])
    await expect(migrateToLatest(db)).rejects.toThrow(
      `its latest stock migration is _20270101T000000000Z, expected ${PINNED_STOCK_MIGRATION}`,
    )
    // Refused before touching anything.
    expect(await tableExists(schema, 'openplane_migration')).toBe(false)
    expect(await tableExists(schema, 'openplane_cursor')).toBe(false)
  })

  it('runs every migration on PGlite, with working transactions', async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'openplane-pglite-'))
    try {
      const db = createPgliteDb({ dataDir: path.join(dataDir, 'db'), schema: 'bsky' })
      expect(await migrateToLatest(db)).toEqual({
        adopted: false,
        applied: [
          '0001-stock-schema',
          '0002-openplane-tables',
          '0003-actor-ids',
          '0004-repo-backfill',
          '0005-repo-queue',
          '0006-stream-cursor',
          '0007-repo-resync',
          '0008-cursor-event-time',
          '0009-post-search',
          '0010-published-events',
        ],
      })

      const indexedAt = '2025-01-02T03:04:05.000Z'
      const inTx = await db.db.transaction().execute(async (tx) => {
        await tx
          .insertInto('actor')
          .values({ did: 'did:plc:bob', handle: 'bob.test', indexedAt })
          .execute()
        await tx
          .insertInto('post_agg')
          .values({ uri: 'at://did:plc:bob/app.bsky.feed.post/1', likeCount: 3 })
          .execute()
        return tx.selectFrom('actor').select('handle').where('did', '=', 'did:plc:bob').execute()
      })
      expect(inTx).toEqual([{ handle: 'bob.test' }])
      const agg = await db.db.selectFrom('post_agg').selectAll().executeTakeFirstOrThrow()
      expect(agg).toMatchObject({ likeCount: 3, replyCount: 0 })

      // A failed transaction leaves nothing behind, and the connection stays usable.
      await expect(
        db.db.transaction().execute(async (tx) => {
          await tx.insertInto('openplane_cursor').values({ source: 'a', seq: 1 }).execute()
          throw new Error('abort')
        }),
      ).rejects.toThrow('abort')
      expect(await db.db.selectFrom('openplane_cursor').selectAll().execute()).toEqual([])

      // Trigram search works (pg_trgm is loaded and the gist index exists in our schema).
      const { rows } = await sql<{ handle: string }>`
        SELECT handle FROM actor WHERE handle % 'bob.tes'
      `.execute(db.db)
      expect(rows).toEqual([{ handle: 'bob.test' }])
      await db.close()

      // Reopening the same directory finds everything migrated.
      const again = createPgliteDb({ dataDir: path.join(dataDir, 'db'), schema: 'bsky' })
      expect(await migrateToLatest(again)).toEqual({ adopted: false, applied: [] })
      expect(await again.db.selectFrom('actor').select('did').execute()).toEqual([
        { did: 'did:plc:bob' },
      ])
      await again.close()
    } finally {
      await rm(dataDir, { recursive: true, force: true })
    }
  })
})

// Rows copied with COPY … FROM STDIN through Kysely (@openplane/db copy.ts), on a real Postgres:
// in the statement's transaction (gone with its rollback), generated columns computed, every
// value read back as written, a refused row failing the transaction as an insert would; and a
// backend that cannot copy (PGlite) says so before anything relies on it.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { canCopy, copyRows, createPgDb, createPgliteDb, type Db } from '@openplane/db'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { dropSchemas } from '../harness/stock-network.ts'

describe('copyRows', () => {
  const schema = uniqueName('op_copy')
  let db: Db

  beforeAll(async () => {
    db = createPgDb({ url: PG_URL, schema, poolSize: 2 })
    await sql`create schema ${sql.id(schema)}`.execute(db.db)
    await sql`
      create table item (
        uri varchar primary key, text text, n int, ok boolean, doc jsonb,
        "createdAt" varchar not null, "indexedAt" varchar not null,
        "sortAt" varchar generated always as (least("createdAt", "indexedAt")) stored
      )`.execute(db.db)
  })
  afterAll(async () => {
    await db?.close()
    await dropSchemas([schema])
  })

  const row = (i: number, extra: object = {}) => ({
    uri: `at://x/${i}`,
    text: `line\tone\nline two \\ ${i} 🦋`,
    n: i,
    ok: i % 2 === 0,
    doc: JSON.stringify({ k: `v\t${i}` }),
    createdAt: '2026-03-01T11:00:00.000Z',
    indexedAt: '2026-03-01T12:00:00.000Z',
    ...extra,
  })
  const columns = ['uri', 'text', 'n', 'ok', 'doc', 'createdAt', 'indexedAt']

  it('is available on our pg pool', async () => {
    expect(await canCopy(db.db)).toBe(true)
  })

  it("writes in the statement's transaction, values and generated columns as an insert would", async () => {
    await db.db
      .transaction()
      .execute(async (tx) => {
        expect(await copyRows(tx, 'item', columns, [row(1), row(2)])).toBe(2)
        throw new Error('roll back')
      })
      .catch(() => {})
    expect(
      await db.db
        .selectFrom('item' as never)
        .selectAll()
        .execute(),
    ).toEqual([])

    const rows = [row(1), row(2, { text: null, doc: null, n: null })]
    await db.db.transaction().execute((tx) => copyRows(tx, 'item', columns, rows))
    const { rows: got } = await sql<Record<string, unknown>>`
      select uri, text, n, ok, doc::text as doc, "sortAt" from item order by uri`.execute(db.db)
    expect(got).toEqual([
      {
        uri: 'at://x/1',
        text: row(1).text,
        n: 1,
        ok: false,
        doc: '{"k": "v\\t1"}',
        sortAt: '2026-03-01T11:00:00.000Z',
      },
      {
        uri: 'at://x/2',
        text: null,
        n: null,
        ok: true,
        doc: null,
        sortAt: '2026-03-01T11:00:00.000Z',
      },
    ])
  })

  it('fails its transaction on a refused row, leaving nothing of it', async () => {
    const attempt = db.db.transaction().execute(async (tx) => {
      await copyRows(tx, 'item', columns, [row(3)])
      await copyRows(tx, 'item', columns, [row(4), row(1)])
    })
    await expect(attempt).rejects.toThrow(/duplicate key/)
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from item`.execute(db.db)
    expect(rows[0]!.n).toBe(2)
  })

  it('is not offered by embedded PGlite, whose connections would run it as SQL', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'op-copy-'))
    const lite = createPgliteDb({ dataDir: dir, schema: 'bsky' })
    try {
      expect(await canCopy(lite.db)).toBe(false)
    } finally {
      await lite.close()
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

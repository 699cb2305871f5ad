// Named prepared statements of the read pool (@openplane/db prepared.ts), on a real Postgres:
// which reads are prepared, the bound on how many, that answers equal unnamed ones, and that a
// statement whose result type a schema change altered still answers.
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createPgDb, type Db } from '@openplane/db'
import { PLAN_PER_CALL, preparable } from '../../packages/db/src/prepared.ts'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { dropSchemas } from '../harness/stock-network.ts'

describe('prepared reads', () => {
  const schema = uniqueName('op_prepared')
  let db: Db
  let plain: Db

  /** The prepared statements of the pool's one connection: name → text. */
  const prepared = async (): Promise<Map<string, string>> => {
    const { rows } = await sql<{ name: string; statement: string }>`
      select name, statement from pg_prepared_statements`.execute(db.db)
    return new Map(rows.map((r) => [r.name, r.statement]))
  }

  beforeAll(async () => {
    // One connection, so the session the statements live in is the one inspected.
    db = createPgDb({ url: PG_URL, schema, poolSize: 1, preparedStatements: 3 })
    plain = createPgDb({ url: PG_URL, schema, poolSize: 1 })
    await sql`create schema ${sql.id(schema)}`.execute(plain.db)
    await sql`create table item (uri varchar primary key, n int not null)`.execute(plain.db)
    await sql`insert into item select 'at://x/' || i, i from generate_series(1, 20) i`.execute(
      plain.db,
    )
  })

  afterAll(async () => {
    await db?.close()
    await plain?.close()
    await dropSchemas([schema])
  })

  it('names repeated reads only', () => {
    expect(preparable('select "n" from "item" where "uri" = any($1::text[])')).toBe(true)
    expect(preparable('with x as (select 1) select * from x')).toBe(true)
    // A read planned for its values each time (a search) is never prepared.
    expect(preparable(`select "uri" from "post" where "x" @@ $1 limit $2 ${PLAN_PER_CALL}`)).toBe(
      false,
    )
    expect(preparable('select "n" from "item" where "uri" in ($1, $2)')).toBe(false)
    expect(preparable('insert into "item" values ($1, $2)')).toBe(false)
    expect(preparable('update "item" set "n" = $1')).toBe(false)
  })

  it('prepares a list read bound as one array, answers as an unnamed one, and stops at the bound', async () => {
    const byAny = (uris: string[]) =>
      sql<{
        uri: string
        n: number
      }>`select uri, n from item where uri = any(${uris}::text[]) order by n`
    const uris = ['at://x/3', 'at://x/7', 'at://x/99', 'at://x/\'q",{}']
    const first = await byAny(uris).execute(db.db)
    // Again, and with another length: the same statement.
    const again = await byAny(uris.slice(0, 1)).execute(db.db)
    expect(first.rows).toEqual((await byAny(uris).execute(plain.db)).rows)
    expect(first.rows.map((r) => r.n)).toEqual([3, 7])
    expect(again.rows.map((r) => r.n)).toEqual([3])
    let statements = [...(await prepared()).values()]
    expect(statements.filter((s) => s.includes('= any('))).toHaveLength(1)

    // An IN-list is run unnamed.
    await sql`select n from item where uri in (${'a'}, ${'b'})`.execute(db.db)
    statements = [...(await prepared()).values()]
    expect(statements.some((s) => /\bin \(/.test(s))).toBe(false)

    // At most 3 distinct texts are named: the list read, the inspection read, then one more.
    for (let i = 0; i < 5; i++) {
      const r = await sql<{ v: number }>`select ${sql.lit(i)}::int + ${i}::int as v`.execute(db.db)
      expect(r.rows[0]?.v).toBe(2 * i)
    }
    const names = await prepared()
    expect(names.size).toBe(3)
    expect([...names.values()].filter((s) => s.includes('::int as v'))).toHaveLength(1)
  })

  it('still answers when a schema change alters a prepared read’s result type', async () => {
    const other = createPgDb({ url: PG_URL, schema, poolSize: 1, preparedStatements: 10 })
    try {
      const read = () =>
        sql<
          Record<string, unknown>
        >`select * from item where uri = any(${['at://x/1']}::text[])`.execute(other.db)
      expect((await read()).rows).toEqual([{ uri: 'at://x/1', n: 1 }])
      await sql`alter table item add column extra int default 5`.execute(plain.db)
      expect((await read()).rows).toEqual([{ uri: 'at://x/1', n: 1, extra: 5 }])
      expect((await read()).rows).toEqual([{ uri: 'at://x/1', n: 1, extra: 5 }])
    } finally {
      await other.close()
    }
  })
})

// Statements made on a recorder (@openplane/db recorded.ts) and run on the transaction thread
// (transaction-thread.ts), on a real Postgres: they commit together, in the order made, COPYs
// with their rows and parameters of every kind as pg sends them; a refused statement leaves
// nothing behind and says COMMIT was not sent; the last statement's rows come back; closing ends
// the thread and its connection.
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  copyRows,
  createPgDb,
  recordingDb,
  TransactionFailed,
  TransactionThread,
  type Db,
} from '@openplane/db'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { dropSchemas } from '../harness/stock-network.ts'

describe('the transaction thread', () => {
  const schema = uniqueName('op_txthread')
  let db: Db

  beforeAll(async () => {
    db = createPgDb({ url: PG_URL, schema, poolSize: 2 })
    await sql`create schema ${sql.id(schema)}`.execute(db.db)
    await sql`
      create table item (
        uri varchar primary key, n int, ok boolean, doc jsonb, at timestamptz, raw bytea,
        tags text[]
      )`.execute(db.db)
  })
  afterAll(async () => {
    await db?.close()
    await dropSchemas([schema])
  })

  const items = () =>
    db.db
      .selectFrom('item' as never)
      .selectAll()
      .orderBy('uri' as never)
      .execute() as Promise<Record<string, unknown>[]>

  it('runs what was recorded in one transaction, in order, and returns the last rows', async () => {
    const rec = recordingDb()
    await copyRows(
      rec.db,
      'item',
      ['uri', 'n'],
      [
        { uri: 'a', n: 1 },
        { uri: 'b\tx', n: 2 },
      ],
    )
    const at = new Date('2026-03-01T12:00:00.000Z')
    await sql`insert into item (uri, n, ok, doc, at, raw, tags)
      values (${'c'}, ${3}, ${true}, ${JSON.stringify({ k: 'v' })}, ${at}, ${new Uint8Array([1, 171])},
        ${['x', 'y"z']}::text[])`.execute(rec.db)
    // Answered with nothing on the recorder: it is run later.
    const { rows } = await sql`update item set n = n + 10 where uri = 'a' returning n`.execute(
      rec.db,
    )
    expect(rows).toEqual([])
    await sql`select count(*)::int as count from item`.execute(rec.db)
    const statements = rec.take()
    expect(statements).toHaveLength(4)
    expect(rec.take()).toEqual([])

    const last = await db.transactions!.run(statements)
    expect(last).toEqual([{ count: 3 }])
    expect(await items()).toEqual([
      { uri: 'a', n: 11, ok: null, doc: null, at: null, raw: null, tags: null },
      { uri: 'b\tx', n: 2, ok: null, doc: null, at: null, raw: null, tags: null },
      {
        uri: 'c',
        n: 3,
        ok: true,
        doc: { k: 'v' },
        at,
        raw: Buffer.from([1, 171]),
        tags: ['x', 'y"z'],
      },
    ])
  })

  it('leaves nothing behind when a statement is refused, and says COMMIT was not sent', async () => {
    const rec = recordingDb()
    await sql`insert into item (uri, n) values ('d', 4)`.execute(rec.db)
    await sql`insert into item (uri, n) values ('a', 5)`.execute(rec.db)
    const err: unknown = await db.transactions!.run(rec.take()).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(TransactionFailed)
    expect((err as TransactionFailed).commitSent).toBe(false)
    expect((err as TransactionFailed).code).toBe('23505')
    expect((await items()).map((r) => r['uri'])).toEqual(['a', 'b\tx', 'c'])
    // The next transaction runs on a connection of its own again.
    await sql`insert into item (uri, n) values ('d', 4)`.execute(rec.db)
    await db.transactions!.run(rec.take())
    expect((await items()).map((r) => r['uri'])).toEqual(['a', 'b\tx', 'c', 'd'])
  })

  it('runs transactions one after another, and refuses any once closed', async () => {
    const thread = new TransactionThread({ url: PG_URL, schema })
    const made = await Promise.all(
      [1, 2, 3].map(async (i) => {
        const rec = recordingDb()
        await sql`update item set n = n * 10 + ${i} where uri = 'd'`.execute(rec.db)
        await sql`select n from item where uri = 'd'`.execute(rec.db)
        return rec.take()
      }),
    )
    const runs = made.map((statements) => thread.run(statements))
    expect(await Promise.all(runs)).toEqual([[{ n: 41 }], [{ n: 412 }], [{ n: 4123 }]])
    await thread.close()
    await expect(thread.run([])).rejects.toThrow(/closed/)
    await expect(thread.started()).rejects.toThrow(/closed/)
  })

  it('starts before its first transaction when asked', async () => {
    const thread = new TransactionThread({ url: PG_URL, schema })
    await thread.started()
    await thread.started()
    const rec = recordingDb()
    await sql`select count(*)::int as n from item where uri = 'd'`.execute(rec.db)
    expect(await thread.run(rec.take())).toEqual([{ n: 1 }])
    await thread.close()
  })
})

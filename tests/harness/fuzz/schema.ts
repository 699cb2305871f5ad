// Postgres helpers of the fuzzer: one small pool for its own reads, clearing a schema between
// sequences (much cheaper than migrating a fresh one), and counters checked against their rows.
import pg from 'pg'
import { aggRows } from '../counters.ts'
import { PG_URL } from '../env.ts'

let pool: pg.Pool | undefined
export const fuzzPool = (): pg.Pool => (pool ??= new pg.Pool({ connectionString: PG_URL, max: 4 }))
export async function closeFuzzPool(): Promise<void> {
  await pool?.end()
  pool = undefined
}

const tablesOf = new Map<string, string[]>()

/** Deletes every row of the schema's tables, migrations' bookkeeping aside. */
export async function clearSchema(schema: string): Promise<void> {
  let tables = tablesOf.get(schema)
  if (!tables) {
    const { rows } = await fuzzPool().query<{ table_name: string }>(
      `select table_name from information_schema.tables
       where table_schema = $1 and table_type = 'BASE TABLE' and table_name not like 'kysely_%'`,
      [schema],
    )
    tables = rows.map((r) => r.table_name)
    tablesOf.set(schema, tables)
  }
  await fuzzPool().query(tables.map((t) => `delete from "${schema}"."${t}";`).join('\n'))
}

/** Stored counters that differ from the recount, as readable lines (empty when exact). */
export async function inexactCounters(schema: string): Promise<string[]> {
  const out: string[] = []
  for (const table of ['post_agg', 'profile_agg'] as const) {
    const [stored, recounted] = await Promise.all([
      aggRows(fuzzPool(), schema, table, 'stored'),
      aggRows(fuzzPool(), schema, table, 'recounted'),
    ])
    const want = new Set(recounted)
    for (const row of stored) if (!want.has(row)) out.push(`${table} stored ${row}`)
    const have = new Set(stored)
    for (const row of recounted) if (!have.has(row)) out.push(`${table} recount ${row}`)
  }
  return out
}

// Applies a batch's net writes (BatchState.writes()): per table, one statement deleting every row
// whose key the batch removed or replaced, then one inserting every row it added or replaced
// (split only to stay under Postgres' limit of parameters per statement). Statements per batch
// follow the number of tables touched, not the number of events.
import { sql, type Kysely } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'
import { PRIMARY_KEYS, type Row } from './state.ts'

type Db = Kysely<DatabaseSchema>

/** Postgres takes at most 65535 parameters in one statement. */
const MAX_PARAMS = 60_000

/** Generated columns (the stock's sortAt), which an insert must leave out. */
export async function generatedColumns(db: Db): Promise<Map<string, Set<string>>> {
  const { rows } = await sql<{ table: string; column: string }>`
    select table_name as "table", column_name as "column" from information_schema.columns
    where table_schema = current_schema() and is_generated = 'ALWAYS'
  `.execute(db)
  const out = new Map<string, Set<string>>()
  for (const r of rows) out.set(r.table, (out.get(r.table) ?? new Set()).add(r.column))
  return out
}

export async function applyWrites(
  db: Db,
  writes: Map<string, { deleted: Row[]; inserted: Row[] }>,
  generated: Map<string, Set<string>>,
): Promise<number> {
  let statements = 0
  // Deletes first: a replaced row, or a row whose unique slot another row takes, must be gone
  // before its successor is inserted.
  for (const [table, { deleted }] of writes) {
    if (!deleted.length) continue
    const pk = PRIMARY_KEYS[table]!
    const cols = sql.join(pk.map((c) => sql`${sql.ref(c)}::text`))
    const arrays = sql.join(pk.map((c) => sql`${deleted.map((r) => String(r[c]))}::text[]`))
    await sql`
      delete from ${sql.table(table)} where (${cols}) in (select * from unnest(${arrays}))
    `.execute(db)
    statements++
  }
  for (const [table, { inserted }] of writes) {
    if (!inserted.length) continue
    const skip = generated.get(table)
    const columns = [...new Set(inserted.flatMap((r) => Object.keys(r)))].filter(
      (c) => !skip?.has(c),
    )
    const perStatement = Math.max(1, Math.floor(MAX_PARAMS / columns.length))
    for (let i = 0; i < inserted.length; i += perStatement) {
      const values = inserted
        .slice(i, i + perStatement)
        .map((r) => Object.fromEntries(columns.map((c) => [c, r[c] ?? null])))
      await db
        .insertInto(table as keyof DatabaseSchema)
        .values(values as never)
        .execute()
      statements++
    }
  }
  return statements
}

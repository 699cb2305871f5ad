// Applies a batch's net writes (BatchState.writes()): per table, one statement deleting every row
// whose key the batch removed or replaced, then one inserting every row it added or replaced
// (split only by the set of columns given, so a column left out keeps its default); every column
// goes as one array parameter, so a statement binds as many parameters for 5 rows as for 5,000. Statements per batch follow the number
// of tables touched, not the number of events.
import { sql, type Kysely } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'
import type { SchemaInfo } from './schema.ts'
import type { Row } from './state.ts'

type Db = Kysely<DatabaseSchema>

export type Writes = Map<string, { deleted: Row[]; inserted: Row[] }>

export async function applyWrites(db: Db, writes: Writes, schema: SchemaInfo): Promise<number> {
  let statements = 0
  // Deletes first: a replaced row, or a row whose unique slot another row takes, must be gone
  // before its successor is inserted.
  for (const [table, { deleted }] of writes) {
    if (!deleted.length) continue
    const pk = schema.get(table)!.primary
    const cols = sql.join(pk.map((c) => sql`${sql.ref(c)}::text`))
    const arrays = sql.join(pk.map((c) => sql`${deleted.map((r) => String(r[c]))}::text[]`))
    await sql`
      delete from ${sql.table(table)} where (${cols}) in (select * from unnest(${arrays}))
    `.execute(db)
    statements++
  }
  for (const [table, { inserted }] of writes) {
    if (!inserted.length) continue
    const skip = schema.get(table)!.generated
    const shapes = new Map<string, { columns: string[]; rows: Row[] }>()
    for (const row of inserted) {
      const columns = Object.keys(row)
        .filter((c) => !skip.has(c) && row[c] !== undefined)
        .sort()
      const shape = columns.join(',')
      let s = shapes.get(shape)
      if (!s) shapes.set(shape, (s = { columns, rows: [] }))
      s.rows.push(row)
    }
    const types = schema.get(table)!.types
    for (const { columns, rows } of shapes.values()) {
      // One array per column, whatever the number of rows: no per-row parameters to bind.
      const cols = sql.join(columns.map((c) => sql.ref(c)))
      const arrays = sql.join(
        columns.map((c) => {
          const values = rows.map((r) => (r[c] == null ? null : r[c]))
          return sql`${values}::${sql.raw(`${types.get(c) ?? 'text'}[]`)}`
        }),
      )
      await sql`
        insert into ${sql.table(table)} (${cols}) select * from unnest(${arrays})
      `.execute(db)
      statements++
    }
  }
  return statements
}

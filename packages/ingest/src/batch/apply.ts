// Applies a batch's net writes (BatchState.writes()) with a few statements per table, whatever
// the number of rows: every column goes as one array parameter, so a statement binds as many
// parameters for 5 rows as for 5,000. Statements per batch follow the number of tables touched,
// not the number of events.
//
// A row whose key stays is updated in place, and only in the columns the batch changed: a column
// someone else sets meanwhile (a takedown through the admin rpcs, between this batch's read and
// its write) keeps their value. Columns the new row leaves out go back to their default, as a
// re-insert would leave them. Only a row that moves within a unique key that cannot step aside
// through null is deleted and inserted again.
import { sql, type Kysely, type RawBuilder } from 'kysely'
import { copyRows, type DatabaseSchema } from '@openplane/db'
import type { SchemaInfo, TableInfo } from './schema.ts'
import { sameValue, type Row, type TableWrites, type Writes } from './state.ts'

type Db = Kysely<DatabaseSchema>

interface Update {
  /** Columns given a new value. */
  set: string[]
  /** Columns the new row leaves out: back to their default. */
  reset: string[]
  after: Row
}

interface TablePlan {
  deleted: Row[]
  /** Rows that must leave a unique slot first: their moving columns set to null. */
  stepAside: { rows: Row[]; columns: string[] }[]
  updated: Update[]
  inserted: Row[]
}

export async function applyWrites(db: Db, writes: Writes, schema: SchemaInfo): Promise<number> {
  const plans = new Map<string, TablePlan>()
  for (const [table, w] of writes) plans.set(table, planTable(schema.get(table)!, w))
  let statements = 0
  // Order across tables and kinds: slots are freed (step aside, deletes) before anything takes
  // one (updates, inserts).
  for (const [table, p] of plans) {
    for (const { rows, columns } of p.stepAside) {
      const info = schema.get(table)!
      await updateRows(db, table, info, rows, [], [], columns)
      statements++
    }
  }
  for (const [table, p] of plans) {
    if (!p.deleted.length) continue
    const pk = schema.get(table)!.primary
    const cols = sql.join(pk.map((c) => sql`${sql.ref(c)}::text`))
    const arrays = sql.join(pk.map((c) => sql`${p.deleted.map((r) => String(r[c]))}::text[]`))
    await sql`
      delete from ${sql.table(table)} where (${cols}) in (select * from unnest(${arrays}))
    `.execute(db)
    statements++
  }
  for (const [table, p] of plans) {
    const info = schema.get(table)!
    for (const group of groupBy(p.updated, (u) => `${u.set.join(',')}|${u.reset.join(',')}`)) {
      const { set, reset } = group[0]!
      await updateRows(
        db,
        table,
        info,
        group.map((u) => u.after),
        set,
        reset,
        [],
      )
      statements++
    }
  }
  for (const [table, p] of plans) {
    const info = schema.get(table)!
    // The columns a row gives, in the table's order; its key a bit per column (a number, not a
    // string built a character at a time for every row), or a string past a number's bits.
    const written = info.columns.filter((c) => !info.generated.has(c))
    const shapeOf: (row: Row) => number | string =
      written.length <= 52
        ? (row: Row) => {
            let key = 0
            let bit = 1
            for (const c of written) {
              if (row[c] !== undefined) key += bit
              bit *= 2
            }
            return key
          }
        : (row: Row) => written.map((c) => (row[c] === undefined ? '0' : '1')).join('')
    for (const rows of groupBy(p.inserted, shapeOf)) {
      const first = rows[0]!
      const columns = written.filter((c) => first[c] !== undefined)
      statements++
      // Every planned insert finds its slots free, so the rows can go as they are: COPY's text
      // costs Postgres about two thirds of what the same rows cost as unnested arrays.
      if (schema.copy) {
        await copyRows(db, table, columns, rows)
        continue
      }
      await sql`
        insert into ${sql.table(table)} (${sql.join(columns.map((c) => sql.ref(c)))})
        select * from unnest(${sql.join(columns.map((c) => arrayOf(info, rows, c)))})
      `.execute(db)
    }
  }
  return statements
}

/** Sorts a table's writes into deletes, in-place updates (stepping aside first) and inserts. */
function planTable(info: TableInfo, w: TableWrites): TablePlan {
  const out: TablePlan = {
    deleted: [...w.deleted],
    stepAside: [],
    updated: [],
    inserted: [...w.inserted],
  }
  const uniqueColumns = new Set(info.unique.flat())
  const aside: { row: Row; columns: string[] }[] = []
  for (const [before, after] of w.replaced) {
    const set: string[] = []
    const reset: string[] = []
    for (const c of info.columns) {
      if (info.generated.has(c) || info.primary.includes(c)) continue
      const v = after[c]
      if (v === undefined) reset.push(c)
      else if (!sameValue(before[c], v)) set.push(c)
    }
    const moving = [...set, ...reset].filter((c) => uniqueColumns.has(c))
    if (moving.some((c) => !info.nullable.has(c))) {
      out.deleted.push(before)
      out.inserted.push(after)
      continue
    }
    if (moving.length) aside.push({ row: before, columns: moving })
    out.updated.push({ set, reset, after })
  }
  for (const group of groupBy(aside, (a) => a.columns.join(','))) {
    out.stepAside.push({ rows: group.map((a) => a.row), columns: group[0]!.columns })
  }
  return out
}

/**
 * One UPDATE for rows matched by primary key: `set` columns take the rows' values, `reset` ones
 * their default, `nulled` ones null.
 */
async function updateRows(
  db: Db,
  table: string,
  info: TableInfo,
  rows: Row[],
  set: string[],
  reset: string[],
  nulled: string[],
): Promise<void> {
  const pk = info.primary
  const given = [...pk, ...set]
  const assignments = [
    ...set.map((c) => sql`${sql.ref(c)} = ${sql.ref(`v.${c}`)}`),
    ...reset.map((c) => sql`${sql.ref(c)} = default`),
    ...nulled.map((c) => sql`${sql.ref(c)} = null`),
  ]
  const match = sql.join(
    pk.map((c) => sql`${sql.ref(`t.${c}`)} = ${sql.ref(`v.${c}`)}`),
    sql` and `,
  )
  await sql`
    update ${sql.table(table)} as t set ${sql.join(assignments)}
    from unnest(${sql.join(given.map((c) => arrayOf(info, rows, c)))})
      as v(${sql.join(given.map((c) => sql.ref(c)))})
    where ${match}
  `.execute(db)
}

/** A column of `rows` as one typed array parameter. */
function arrayOf(info: TableInfo, rows: Row[], column: string): RawBuilder<unknown> {
  const values = rows.map((r) => (r[column] == null ? null : r[column]))
  return sql`${values}::${sql.raw(`${info.types.get(column) ?? 'text'}[]`)}`
}

function groupBy<T, K>(items: T[], keyOf: (item: T) => K): T[][] {
  const groups = new Map<K, T[]>()
  for (const item of items) {
    const k = keyOf(item)
    let g = groups.get(k)
    if (!g) groups.set(k, (g = []))
    g.push(item)
  }
  return [...groups.values()]
}

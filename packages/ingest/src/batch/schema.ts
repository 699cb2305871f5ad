// What the batch writer needs to know of the tables it plans for, read from Postgres' catalog
// once: columns (json ones are read back as text, as plugins write them), the primary key and
// the other unique keys (a planned insert must find every slot free, as `on conflict do nothing`
// would), and the generated sort columns (least(createdAt, indexedAt)), which the plan computes
// itself so that later reads of a planned row see them.
import { sql, type Kysely } from 'kysely'
import { canCopy, type DatabaseSchema } from '@openplane/db'

export interface TableInfo {
  columns: string[]
  /** Column → its type's name (udt_name: varchar, bool, int4, jsonb…), for array casts. */
  types: Map<string, string>
  json: Set<string>
  /** Generated column → the two columns it is the least of. */
  generated: Map<string, [string, string]>
  primary: string[]
  /** Unique keys other than the primary key. */
  unique: string[][]
  /** Columns that may hold null (a row moving within a unique key can step aside through null). */
  nullable: Set<string>
}

export interface SchemaInfo extends Map<string, TableInfo> {
  /** Whether rows can be written with COPY on these connections (@openplane/db copy.ts). */
  copy?: boolean
}

export async function loadSchemaInfo(db: Kysely<DatabaseSchema>): Promise<SchemaInfo> {
  const { rows: columns } = await sql<{
    table: string
    column: string
    type: string
    udt: string
    generated: string
    expression: string | null
    nullable: string
  }>`
    select table_name as "table", column_name as "column", data_type as "type", udt_name as "udt",
      is_generated as "generated", generation_expression as "expression",
      is_nullable as "nullable"
    from information_schema.columns where table_schema = current_schema()
    order by table_name, ordinal_position
  `.execute(db)
  const { rows: keys } = await sql<{ table: string; primary: boolean; columns: string[] }>`
    select c.relname as "table", i.indisprimary as "primary",
      array(
        select a.attname::text from unnest(i.indkey) with ordinality k(attnum, n)
        join pg_attribute a on a.attrelid = c.oid and a.attnum = k.attnum order by k.n
      )::text[] as "columns"
    from pg_index i join pg_class c on c.oid = i.indrelid
    where c.relnamespace = current_schema()::regnamespace
      and i.indisunique and i.indpred is null and i.indexprs is null
  `.execute(db)
  const out: SchemaInfo = new Map()
  out.copy = await canCopy(db)
  const info = (table: string): TableInfo => {
    let t = out.get(table)
    if (!t) {
      t = {
        columns: [],
        types: new Map(),
        json: new Set(),
        generated: new Map(),
        primary: [],
        unique: [],
        nullable: new Set(),
      }
      out.set(table, t)
    }
    return t
  }
  for (const c of columns) {
    const t = info(c.table)
    t.columns.push(c.column)
    t.types.set(c.column, c.udt)
    if (c.type === 'json' || c.type === 'jsonb') t.json.add(c.column)
    if (c.nullable === 'YES') t.nullable.add(c.column)
    if (c.generated === 'ALWAYS') {
      const refs = [...(c.expression ?? '').matchAll(/"(\w+)"/g)].map((m) => m[1]!)
      if (!/^\s*LEAST\(/i.test(c.expression ?? '') || refs.length !== 2) {
        throw new Error(
          `generated column ${c.table}.${c.column} is not least(a, b): ${c.expression}`,
        )
      }
      t.generated.set(c.column, [refs[0]!, refs[1]!])
    }
  }
  for (const k of keys) {
    const t = info(k.table)
    if (k.primary) t.primary = k.columns
    else t.unique.push(k.columns)
  }
  return out
}

// A comparable snapshot of one schema's catalog: everything that makes two schemas "the same" to
// a client (tables, columns, constraints, indexes, sequences, views), with the schema name removed.
import type pg from 'pg'

export interface Catalog {
  relations: Row[]
  columns: Row[]
  constraints: Row[]
  indexes: Row[]
  sequences: Row[]
  views: Row[]
  /** Functions, triggers and user types: none in the stock, so any on our side is drift. */
  other: Row[]
}

type Row = Record<string, unknown>

const QUERIES: Record<keyof Catalog, string> = {
  relations: `
    SELECT c.relname AS name, c.relkind AS kind, c.relpersistence AS persistence,
      c.relreplident AS replica_identity, c.reloptions::text AS options,
      c.relispopulated AS populated, c.relrowsecurity AS row_security
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
    ORDER BY 1`,
  // Position counts live columns only: the stock's dropped columns leave gaps in attnum.
  columns: `
    SELECT c.relname AS table, a.attname AS column,
      (row_number() OVER (PARTITION BY c.oid ORDER BY a.attnum))::int AS position,
      format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull AS not_null,
      a.attgenerated AS generated, a.attidentity AS identity,
      pg_get_expr(d.adbin, d.adrelid) AS default_or_generation_expr,
      co.collname AS collation
    FROM pg_attribute a
    JOIN pg_class c ON c.oid = a.attrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    LEFT JOIN pg_collation co ON co.oid = a.attcollation
    WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
      AND a.attnum > 0 AND NOT a.attisdropped
    ORDER BY 1, 3`,
  constraints: `
    SELECT c.relname AS table, con.conname AS name, con.contype AS type,
      ARRAY(
        SELECT a.attname::text
        FROM unnest(con.conkey) WITH ORDINALITY AS k(attnum, ord)
        JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum
        ORDER BY k.ord
      ) AS columns,
      pg_get_constraintdef(con.oid) AS definition,
      con.condeferrable AS deferrable, con.condeferred AS deferred, con.convalidated AS validated
    FROM pg_constraint con
    JOIN pg_class c ON c.oid = con.conrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = $1
    ORDER BY 1, 2`,
  indexes: `
    SELECT tablename AS table, indexname AS name, indexdef AS definition
    FROM pg_indexes WHERE schemaname = $1
    ORDER BY 1, 2`,
  sequences: `
    SELECT s.sequencename AS name, s.data_type::text AS type, s.start_value::text AS start,
      s.min_value::text AS min, s.max_value::text AS max, s.increment_by::text AS increment,
      s.cycle, s.cache_size::text AS cache,
      (
        SELECT t.relname || '.' || a.attname
        FROM pg_depend d
        JOIN pg_class t ON t.oid = d.refobjid
        JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
        WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass
          AND d.objid = (quote_ident(s.schemaname) || '.' || quote_ident(s.sequencename))::regclass
          AND d.deptype IN ('a', 'i')
      ) AS owned_by
    FROM pg_sequences s WHERE s.schemaname = $1
    ORDER BY 1`,
  views: `
    SELECT c.relname AS name, c.relkind AS kind, pg_get_viewdef(c.oid, true) AS definition
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = $1 AND c.relkind IN ('v', 'm')
    ORDER BY 1`,
  other: `
    SELECT 'function ' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')' AS object
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1
    UNION ALL
    SELECT 'trigger ' || t.tgname || ' on ' || c.relname
    FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = $1 AND NOT t.tgisinternal
    UNION ALL
    SELECT 'type ' || t.typname || ' (' || t.typtype::text || ')'
    FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
    WHERE n.nspname = $1 AND t.typtype IN ('d', 'e', 'r', 'm')
    ORDER BY 1`,
}

/** Rows of these tables (and of objects on them) are left out, e.g. migration bookkeeping. */
export async function readCatalog(
  pool: pg.Pool,
  schema: string,
  excludeTables: readonly string[],
): Promise<Catalog> {
  const excluded = new Set(excludeTables)
  const keep = (row: Row) =>
    !excluded.has(String(row.table ?? row.name ?? row.object)) &&
    !excluded.has(String(row.owned_by ?? '').split('.')[0] ?? '')
  // Deparsed SQL qualifies names with the schema (it is not on this pool's search_path).
  const unqualify = (value: unknown) =>
    typeof value === 'string'
      ? value.replaceAll(`"${schema}".`, '').replaceAll(`${schema}.`, '')
      : value
  const catalog = {} as Catalog
  for (const [part, query] of Object.entries(QUERIES) as [keyof Catalog, string][]) {
    const { rows } = await pool.query<Row>(query, [schema])
    catalog[part] = rows
      .filter(keep)
      .map((row) => Object.fromEntries(Object.entries(row).map(([k, v]) => [k, unqualify(v)])))
  }
  return catalog
}

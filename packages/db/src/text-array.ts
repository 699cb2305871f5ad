// A text[] parameter written as Postgres' array literal by us, not by the pg client: its writer
// quotes and escapes every element through two regex replacements and a concatenation each,
// which was the largest allocation of a batch's reads (keys by the thousand, read every batch).
// Here an element is escaped only if it holds a quote or a backslash, and the literal is one join.
// anyOf binds a list as one such parameter; eachValue probes a table once per value of one.
import { sql, type RawBuilder } from 'kysely'

const NEEDS_ESCAPE = /["\\]/
const ESCAPED = /["\\]/g

/**
 * `values` as a Postgres array literal of text (`{"a","b",NULL}`), for a parameter cast to
 * `text[]`. Every element is quoted, so commas, braces and spaces in it need nothing more.
 */
export function textArray(values: readonly (string | null)[]): string {
  if (!values.length) return '{}'
  let clean = true
  for (const v of values) {
    if (v === null || NEEDS_ESCAPE.test(v)) {
      clean = false
      break
    }
  }
  if (clean) return `{"${values.join('","')}"}`
  const parts = values.map((v) => (v === null ? 'NULL' : `"${v.replace(ESCAPED, '\\$&')}"`))
  return `{${parts.join(',')}}`
}

/**
 * `any($n::text[])` over `values`, for `.where(column, '=', anyOf(values))`. An IN-list binds a
 * parameter per item, so its statement's text changes with the list's length and cannot be
 * prepared once (prepared.ts prepares repeated reads); this one's does not, and Postgres plans
 * both as the same index scan.
 */
export function anyOf(values: readonly string[]): RawBuilder<string> {
  return sql<string>`any(${textArray(values)}::text[])`
}

/**
 * `unnest($n::text[]) u(v) cross join lateral (probe offset 0) alias`, for a FROM clause: `probe`
 * (a select whose condition names `u.v`) runs once per value, through the index that condition
 * names. The `offset 0` keeps Postgres from flattening it into a join, which it may plan as a
 * sequential scan of the whole table where its statistics mislead it (a table new or growing
 * faster than autovacuum analyzes it, or of middling size): a cost that grows with the table,
 * where the probes cost what the values do.
 */
export function eachValue(
  values: readonly string[],
  probe: RawBuilder<unknown>,
  alias: string,
): RawBuilder<unknown> {
  return sql`unnest(${textArray(values)}::text[]) u(v) cross join lateral (${probe} offset 0) ${sql.id(alias)}`
}

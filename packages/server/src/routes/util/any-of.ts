// A list bound as one array parameter: `column = any($1)`. An IN-list binds a parameter per item,
// so its statement's text changes with the list's length and cannot be prepared once; this one's
// does not (@openplane/db prepares repeated reads). Postgres plans both as the same index scan.
import { sql, type RawBuilder } from 'kysely'

/** `any($n::text[])` over `values`, for `.where(column, '=', anyOf(values))`. */
export function anyOf(values: readonly string[]): RawBuilder<string> {
  return sql<string>`any(${[...values]}::text[])`
}

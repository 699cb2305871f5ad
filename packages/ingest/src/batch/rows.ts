// Rows as a batch's state holds them, and the keys it files them under.

export type Value = string | number | boolean | null
export type Row = Record<string, unknown>
export type Where = Record<string, Value>

const SEP = '\u0001'

/** A key of column values; one value is its own key (most reads are by one column). */
export const keyOf = (values: readonly unknown[]): string => {
  if (values.length === 1) return String(values[0])
  let key = String(values[0])
  for (let i = 1; i < values.length; i++) key += SEP + String(values[i])
  return key
}

/** A row's primary key (`pk` its columns), without an array for a one-column key. */
export const primaryKeyOf = (pk: readonly string[], row: Row): string =>
  pk.length === 1 ? String(row[pk[0]!]) : keyOf(pk.map((c) => row[c]))

/** The key of a row's values in `columns`. */
export const matchOf = (columns: readonly string[], row: Row): string =>
  columns.length === 1 ? String(row[columns[0]!]) : keyOf(columns.map((c) => row[c]))

/** Whether two column values are the same as Postgres stores them (null and absent alike). */
export function sameValue(a: unknown, b: unknown): boolean {
  return a === b || (a == null && b == null) || (a != null && b != null && String(a) === String(b))
}

/** Whether `now` differs from `before` in any column it has (planned rows may leave defaults out). */
export function differs(before: Row, now: Row): boolean {
  for (const c in now) if (!sameValue(before[c], now[c])) return true
  return false
}

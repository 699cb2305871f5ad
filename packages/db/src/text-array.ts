// A text[] parameter written as Postgres' array literal by us, not by the pg client: its writer
// quotes and escapes every element through two regex replacements and a concatenation each,
// which was the largest allocation of a batch's reads (keys by the thousand, read every batch).
// Here an element is escaped only if it holds a quote or a backslash, and the literal is one join.

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

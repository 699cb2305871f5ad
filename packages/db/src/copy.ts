// Rows written with COPY … FROM STDIN through Kysely. Postgres parses COPY's text rows for about
// two thirds of the CPU an `insert … select * from unnest($1::varchar[], …)` of the same rows
// costs (array parameters are parsed element by element, then unnested); measured here on like
// rows with the stock's indexes: 19.6 against 32.0 µs a row.
//
// Kysely runs statements as text with parameters, so a COPY goes as a statement that names its
// rows: the pg client of our pool (installCopy, on each new connection) recognises it and sends
// it as COPY on that connection, with the rows as its data. It thereby joins whatever
// transaction the connection is in, and fails it as an insert would. Connections of other
// backends (PGlite) do not recognise it: `canCopy` asks before a writer relies on it.
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { sql, type Kysely } from 'kysely'
import type pg from 'pg'
import { from as copyFrom } from 'pg-copy-streams'
import type { DatabaseSchema } from './schema.ts'

const MARK = '/* openplane copy '
/** Rows waiting for their statement to reach a connection, by id. */
const waiting = new Map<number, string>()
let nextId = 0

type Query = (...args: unknown[]) => unknown

/** Teaches a pg client of ours to run the statements copyRows makes. */
export function installCopy(client: pg.ClientBase): void {
  const query = client.query.bind(client) as Query
  client.query = ((...args: unknown[]) => {
    const text = args[0]
    if (typeof text !== 'string' || !text.startsWith(MARK)) return query(...args)
    return runCopy(query, text)
  }) as typeof client.query
}

async function runCopy(query: Query, text: string) {
  const copy = copyOf(text)
  if (copy === undefined) return query(text)
  // The probe of canCopy.
  if (copy === 'probe') return { command: 'SELECT', rowCount: 1, rows: [{ copy: true }] }
  const stream = query(copyFrom(copy.statement)) as ReturnType<typeof copyFrom>
  await pipeline(Readable.from([copy.data]), stream)
  return { command: 'COPY', rowCount: stream.rowCount, rows: [] }
}

/** A COPY that copyRows made: its statement and its rows as COPY's text. */
export interface CopyStatement {
  statement: string
  data: string
}

/**
 * The COPY a statement of copyRows stands for (`'probe'` for canCopy's), or undefined for any
 * other statement. Throws when its rows are gone (its copyRows already answered).
 */
export function copyOf(text: string): CopyStatement | 'probe' | undefined {
  if (!text.startsWith(MARK)) return undefined
  const end = text.indexOf(' */', MARK.length)
  const id = Number(text.slice(MARK.length, end))
  if (Number.isNaN(id)) return 'probe'
  // copyRows forgets them once its statement is answered.
  const data = waiting.get(id)
  if (data === undefined) throw new Error(`copy ${id}: its rows are gone`)
  return { statement: text.slice(end + 3).trim(), data }
}

/** Whether statements on `db` reach a client that copies (installCopy). */
export async function canCopy(db: Kysely<DatabaseSchema>): Promise<boolean> {
  const { rows } = await sql<{
    copy: boolean
  }>`${sql.raw(`${MARK}probe */`)} select false as copy`.execute(db)
  return rows[0]?.copy === true
}

/**
 * Copies `rows` (their `columns`, in order) into `table` on `db`'s connection, in its transaction
 * if it is in one. Only on a Kysely whose connections copy (canCopy). Returns the rows copied.
 */
export async function copyRows(
  db: Kysely<DatabaseSchema>,
  table: string,
  columns: readonly string[],
  rows: readonly Record<string, unknown>[],
): Promise<number> {
  const id = nextId++
  waiting.set(id, copyText(rows, columns))
  try {
    const list = columns.map(quoted).join(', ')
    const statement = `${MARK}${id} */ copy ${quoted(table)} (${list}) from stdin`
    const result = await sql.raw(statement).execute(db)
    return Number(result.numAffectedRows ?? rows.length)
  } finally {
    waiting.delete(id)
  }
}

/** An identifier as SQL quotes it. */
const quoted = (name: string) => `"${name.replaceAll('"', '""')}"`

const SPECIAL = /[\\\t\n\r]/
const SPECIAL_ALL = /[\\\t\n\r]/g
const ESCAPES: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' }
const escape = (s: string) => (SPECIAL.test(s) ? s.replace(SPECIAL_ALL, (c) => ESCAPES[c]!) : s)

/**
 * COPY's text format: a line per row, columns by tab, `\N` for null, backslash escapes. Values
 * become what pg would send as parameters: JSON for objects, `t`/`f`, ISO times, bytea as hex.
 */
export function copyText(
  rows: readonly Record<string, unknown>[],
  columns: readonly string[],
): string {
  let out = ''
  for (const row of rows) {
    for (let i = 0; i < columns.length; i++) {
      if (i) out += '\t'
      const v = row[columns[i]!]
      if (v === null || v === undefined) out += '\\N'
      else if (typeof v === 'string') out += escape(v)
      else if (typeof v === 'number' || typeof v === 'bigint') out += String(v)
      else if (typeof v === 'boolean') out += v ? 't' : 'f'
      else if (v instanceof Date) out += v.toISOString()
      else if (v instanceof Uint8Array) out += `\\\\x${Buffer.from(v).toString('hex')}`
      else if (Array.isArray(v)) {
        throw new Error(
          `column ${columns[i]}: an array has no COPY form here; send it as JSON text`,
        )
      } else out += escape(JSON.stringify(v))
    }
    out += '\n'
  }
  return out
}

// Keyset pagination with the stock's cursor formats, so AppView cursors (and the snapshots that
// normalise them) look the same on either dataplane.
//   time+cid cursor: `<epoch-ms of the time column>__<cid or did>`, ordered (time desc, key desc).
import { Code, ConnectError } from '@connectrpc/connect'
import { sql, type RawBuilder, type SqlBool } from 'kysely'

export interface TimeKey {
  /** ISO time, as stored. */
  time: string
  key: string
}

export function malformedCursor(): ConnectError {
  return new ConnectError('malformed cursor', Code.InvalidArgument)
}

/** Parses `<epoch-ms>__<key>`; empty means "from the start". */
export function decodeTimeKey(cursor: string | undefined): TimeKey | undefined {
  if (!cursor) return undefined
  const parts = cursor.split('__')
  if (parts.length !== 2 || !parts[0] || !parts[1]) throw malformedCursor()
  if (!/^-?\d+$/.test(parts[0])) throw malformedCursor()
  const date = new Date(Number(parts[0]))
  if (Number.isNaN(date.getTime())) throw malformedCursor()
  return { time: date.toISOString(), key: parts[1] }
}

export function encodeTimeKey(time: string, key: string): string {
  return `${new Date(time).getTime()}__${key}`
}

/**
 * `(timeCol, keyCol) < (t, k)` for descending pages. The row-value form lets Postgres walk a
 * (time, key) index; `orForm` spells it as the stock does for the queries where it does so.
 */
export function before(
  timeCol: string,
  keyCol: string,
  at: TimeKey,
  orForm = false,
): RawBuilder<SqlBool> {
  const t = sql.ref(timeCol)
  const k = sql.ref(keyCol)
  return orForm
    ? sql<SqlBool>`((${t} < ${at.time}) or (${t} = ${at.time} and ${k} < ${at.key}))`
    : sql<SqlBool>`((${t}, ${k}) < (${at.time}, ${at.key}))`
}

/**
 * Cuts a `limit + 1` result to a page. The cursor names the last item only when more rows
 * exist, so an exactly filled last page ends with an empty cursor, as the stock's does.
 */
export function page<R>(
  rows: R[],
  limit: number,
  cursorOf: (row: R) => string,
): { items: R[]; cursor: string } {
  const items = rows.slice(0, limit)
  const last = items.at(-1)
  return { items, cursor: rows.length > limit && last ? cursorOf(last) : '' }
}

/** The stock clamps nothing at the dataplane; the AppView sends sane limits. Guard the extremes. */
export function clampLimit(limit: number, dflt = 50, max = 1000): number {
  if (!Number.isFinite(limit) || limit <= 0) return dflt
  return Math.min(Math.floor(limit), max)
}

// The stock's single-key ISO cursors and its limit handling, beside the time+key cursors of
// pagination.ts.
import { malformedCursor } from './pagination.ts'

/**
 * `<ISO time>`: the stock's single-key cursor (notifications, drafts). Empty means "from the
 * start". Any form `new Date` reads is accepted and normalised, as the stock does; the AppView
 * sends a bare ISO time even on the first page of notifications.
 */
export function decodeIsoCursor(cursor: string | undefined): string | undefined {
  if (!cursor) return undefined
  if (cursor.includes('__')) throw malformedCursor()
  const date = new Date(cursor)
  if (Number.isNaN(date.getTime())) throw malformedCursor()
  return date.toISOString()
}

export function encodeIsoCursor(time: string): string {
  return new Date(time).toISOString()
}

/**
 * Rows a page may hold. The stock fetches `limit + 1` rows and slices them to `limit`, so a zero
 * or negative limit yields an empty page; the cap only guards the extremes (the AppView asks for
 * at most 100).
 */
export function pageSize(limit: number, max = 1000): number {
  if (!Number.isFinite(limit) || limit <= 0) return 0
  return Math.min(Math.floor(limit), max)
}

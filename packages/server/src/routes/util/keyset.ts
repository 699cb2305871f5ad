// Paging pieces beside pagination.ts: applying a time+key page to a query, and the stock's
// single-key cursor over stash keys (bookmarks, activity subscriptions), which pages `key desc`.
import { sql, type SelectQueryBuilder } from 'kysely'
import { before, malformedCursor, type TimeKey } from './pagination.ts'

/**
 * Orders by (time desc, key desc), starts after the cursor position and reads one row past the
 * page so `page()` can tell whether more follow. Row-value comparison keeps it on the
 * (…, sortAt, cid) indexes.
 */
export function timeKeyDesc<DB, TB extends keyof DB, O>(
  qb: SelectQueryBuilder<DB, TB, O>,
  opts: { timeCol: string; keyCol: string; after: TimeKey | undefined; limit: number },
): SelectQueryBuilder<DB, TB, O> {
  const { timeCol, keyCol, after, limit } = opts
  const ordered = qb
    .orderBy(sql.ref(timeCol), 'desc')
    .orderBy(sql.ref(keyCol), 'desc')
    .limit(limit + 1)
  return after ? ordered.where(before(timeCol, keyCol, after)) : ordered
}

/** Orders by stash key desc, after the cursor key, one row past the page. */
export function keyDesc<DB, TB extends keyof DB, O>(
  qb: SelectQueryBuilder<DB, TB, O>,
  opts: { keyCol: string; after: string | undefined; limit: number },
): SelectQueryBuilder<DB, TB, O> {
  const { keyCol, after, limit } = opts
  const ordered = qb.orderBy(sql.ref(keyCol), 'desc').limit(limit + 1)
  return after ? ordered.where(sql<boolean>`${sql.ref(keyCol)} < ${after}`) : ordered
}

const RECORD_KEY = /^[a-zA-Z0-9_~.:-]{1,512}$/

/** A stash-key cursor is a bare record key; anything else is malformed, as in the stock. */
export function decodeKeyCursor(cursor: string | undefined): string | undefined {
  if (!cursor) return undefined
  if (cursor.includes('__') || cursor === '.' || cursor === '..' || !RECORD_KEY.test(cursor)) {
    throw malformedCursor()
  }
  return cursor
}

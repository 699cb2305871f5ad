// Paging pieces pagination.ts lacks: the stock's treatment of limits, and its single-key cursor
// over stash keys (bookmarks, activity subscriptions), which pages by `key desc`.
import { sql, type SelectQueryBuilder } from 'kysely'
import { before, malformedCursor, type TimeKey } from './pagination.ts'

// The AppView's lexicons cap page sizes at 100; this only keeps a stray request from reading an
// unbounded result.
const MAX_PAGE = 1000

/**
 * The stock answers a page of nothing (and no cursor) for a limit of zero or less, rather than
 * falling back to a default, so 0 here means "return an empty page".
 */
export function pageSize(limit: number): number {
  if (!Number.isFinite(limit) || limit <= 0) return 0
  return Math.min(Math.floor(limit), MAX_PAGE)
}

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

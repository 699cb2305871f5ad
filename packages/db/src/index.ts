// @openplane/db: Postgres in exactly the stock dataplane's schema, over pg or embedded PGlite.
export type { Db } from './db.ts'
export { createPgDb, type PgDbOptions } from './pg.ts'
export { createPgliteDb, type PgliteDbOptions } from './pglite.ts'
export {
  migrateToLatest,
  MIGRATION_LOCK_TABLE,
  MIGRATION_TABLE,
  PINNED_STOCK_MIGRATION,
  type MigrateResult,
} from './migrate.ts'
export {
  buildPostSearchIndex,
  POST_SEARCH_INDEX,
  postSearchIndexState,
  type IndexState,
} from './search-index.ts'
export { canCopy, copyRows, copyText } from './copy.ts'
export { recordingDb, type Recorder, type Statement } from './recorded.ts'
export { TransactionFailed, TransactionThread } from './transaction-thread.ts'
export { anyOf, eachValue, textArray } from './text-array.ts'
export { PLAN_PER_CALL } from './prepared.ts'
export { readStreamCursor, saveStreamCursor } from './stream-cursor.ts'
export type * from './schema.ts'
export {
  appendPublished,
  publishedRange,
  publishedTrimmed,
  readPublished,
  trimPublished,
  type PublishedEvent,
} from './published-events.ts'

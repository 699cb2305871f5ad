// Our migrations, in name order. Forward-only: there is no down to a schema the stock would not
// recognise, and adopting a stock database must never drop anything.
import type { Migration, MigrationProvider } from 'kysely'
import * as stockSchema from './0001-stock-schema.ts'
import * as openplaneTables from './0002-openplane-tables.ts'
import * as actorIds from './0003-actor-ids.ts'
import * as repoBackfill from './0004-repo-backfill.ts'
import * as repoQueue from './0005-repo-queue.ts'
import * as streamCursor from './0006-stream-cursor.ts'
import * as repoResync from './0007-repo-resync.ts'
import * as cursorEventTime from './0008-cursor-event-time.ts'
import * as postSearch from './0009-post-search.ts'
import * as publishedEvents from './0010-published-events.ts'

/** Creates the stock's schema; recorded without running when adopting a stock database. */
export const STOCK_SCHEMA_MIGRATION = '0001-stock-schema'

const skipped: Migration = { up: async () => {} }

export function migrationProvider(opts: { adoptStock: boolean }): MigrationProvider {
  const migrations: Record<string, Migration> = {
    [STOCK_SCHEMA_MIGRATION]: opts.adoptStock ? skipped : stockSchema,
    '0002-openplane-tables': openplaneTables,
    '0003-actor-ids': actorIds,
    '0004-repo-backfill': repoBackfill,
    '0005-repo-queue': repoQueue,
    '0006-stream-cursor': streamCursor,
    '0007-repo-resync': repoResync,
    '0008-cursor-event-time': cursorEventTime,
    '0009-post-search': postSearch,
    '0010-published-events': publishedEvents,
  }
  return { getMigrations: async () => migrations }
}

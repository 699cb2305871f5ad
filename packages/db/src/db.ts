// What both backends (pg pool, embedded PGlite) hand out, and the session setup they share.
import type { Kysely } from 'kysely'
import type { DatabaseSchema } from './schema.ts'
import type { TransactionThread } from './transaction-thread.ts'

export type Db = {
  db: Kysely<DatabaseSchema>
  /** The Postgres schema holding every table; first on each connection's search_path. */
  schema: string
  /**
   * Transactions run on a thread and connection of their own (pg only; the thread starts on
   * first use and ends with close).
   */
  transactions?: TransactionThread
  close(): Promise<void>
}

// Interpolated into SQL unquoted-safe: a plain identifier, as the cli config also requires.
const SCHEMA_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/

export function assertSchemaName(schema: string): void {
  if (!SCHEMA_NAME.test(schema)) {
    throw new Error(
      `Postgres schema must be a plain identifier ([A-Za-z_][A-Za-z0-9_]*), got "${schema}"`,
    )
  }
}

/** Our schema first; pg_trgm (and any other shared extension) lives in public, as in the stock. */
export function searchPathSql(schema: string): string {
  return `SET search_path TO "${schema}", public`
}

/** int8 as a JS number on both backends, like the stock (counters and ids stay far below 2^53). */
export function parseInt8(value: string): number {
  return Number.parseInt(value, 10)
}

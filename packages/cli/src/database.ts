import path from 'node:path'
import { sql } from 'kysely'
import { createPgDb, createPgliteDb, migrateToLatest, type Db } from '@openplane/db'
import { logger, throttle } from '@openplane/telemetry'
import type { Config } from './config.ts'

/**
 * Idle pooled connections dropped by Postgres (a restart ends each with 57P01): one line per
 * 10 s, not one per connection with a stack. The pool replaces them on demand.
 */
function poolErrorLog(pool: string): (err: Error) => void {
  const log = throttle(10_000)
  return (err) =>
    log((suppressed) =>
      logger.warn({ pool, err: err.message, suppressed }, 'Postgres dropped an idle connection'),
    )
}

/** Errors that mean "not reachable yet", worth waiting out at start. */
const UNREACHABLE =
  /ECONNREFUSED|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ENOTFOUND|EAI_AGAIN|Connection terminated|the database system is starting up|timeout exceeded when trying to connect/i

/**
 * Waits for Postgres to answer, with backoff (1 s doubling to 30 s): started before it (compose,
 * Kubernetes), the process waits instead of exiting. Errors that are not about reaching it (bad
 * credentials, a missing database) still stop the start, at once and named.
 */
async function reachable(db: Db, url: string): Promise<void> {
  let delay = 1000
  for (let attempt = 1; ; attempt++) {
    try {
      await sql`select 1`.execute(db.db)
      if (attempt > 1) logger.info({ attempts: attempt }, 'Postgres is reachable')
      return
    } catch (err) {
      const text = `${(err as { code?: string }).code ?? ''} ${(err as Error).message ?? ''}`
      if (!UNREACHABLE.test(text)) throw err
      const host = new URL(url).host
      logger.warn({ host, retryMs: delay, attempt }, 'Postgres not reachable yet; waiting')
      await new Promise((r) => setTimeout(r, delay))
      delay = Math.min(delay * 2, 30_000)
    }
  }
}

/**
 * The pool rpc reads use: apart from the writer's, so a burst of reads cannot take the
 * connections the writer needs (nor the reverse), with a statement timeout and a bound on the
 * wait for a connection, so an overloaded or unreachable Postgres answers `unavailable` or
 * `deadline_exceeded` instead of leaving callers waiting, and with its repeated reads prepared
 * (parsed and planned once per connection). The embedded Postgres has one connection: reads
 * share it.
 */
export function openReadDatabase(config: Config, db: Db): Db {
  if (!config.postgres) return db
  return createPgDb({
    url: config.postgres.url,
    schema: config.schema,
    poolSize: config.postgres.poolSize,
    onPoolError: poolErrorLog('reads'),
    statementTimeoutMs: config.postgres.statementTimeoutMs || undefined,
    connectTimeoutMs: config.postgres.connectTimeoutMs,
    idleTimeoutMs: config.postgres.idleTimeoutMs,
    preparedStatements: config.postgres.preparedStatements,
  })
}

/** Postgres when DB_POSTGRES_URL is set, else the embedded PGlite in the data directory. */
export async function openDatabase(config: Config): Promise<Db> {
  let db: Db
  if (config.postgres) {
    db = createPgDb({
      url: config.postgres.url,
      schema: config.schema,
      poolSize: config.postgres.poolSize,
      idleTimeoutMs: config.postgres.idleTimeoutMs,
      onPoolError: poolErrorLog('writer'),
    })
    await reachable(db, config.postgres.url)
  } else {
    const dataDir = path.resolve(config.dataDir, 'postgres')
    logger.info({ dataDir }, 'no DB_POSTGRES_URL: using the embedded Postgres')
    db = await createPgliteDb({ dataDir, schema: config.schema })
  }
  await migrateToLatest(db)
  return db
}

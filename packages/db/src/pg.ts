// A Db over a pg Pool.
import { CompiledQuery, Kysely, PostgresDialect } from 'kysely'
import pg from 'pg'
import { installCopy } from './copy.ts'
import { assertSchemaName, parseInt8, searchPathSql, type Db } from './db.ts'
import { PreparedStatements, preparingPool } from './prepared.ts'
import { TransactionThread } from './transaction-thread.ts'
import type { DatabaseSchema } from './schema.ts'

export interface PgDbOptions {
  url: string
  schema: string
  poolSize?: number
  /** Errors of idle pooled clients (e.g. a server restart); pg would crash the process otherwise. */
  onPoolError?: (err: Error) => void
  /**
   * Postgres cancels any statement of this pool's connections that runs longer (SQLSTATE 57014).
   * Unset: no limit, for the writer and migrations, whose work is bounded by batch sizes instead.
   */
  statementTimeoutMs?: number
  /**
   * How long a query waits for a connection (a free one from the pool, or a new one being made)
   * before failing. Unset: forever, which under an outage leaves callers hanging.
   */
  connectTimeoutMs?: number
  /**
   * A connection idle this long is closed; 0: kept until the pool ends. Unset: pg's 10 s. A new
   * connection costs Postgres a backend (a fork, its catalog caches filled again, its statements
   * prepared again, shared buffers mapped page by page), so a pool serving bursts of reads keeps
   * its connections longer than the quiet between bursts.
   */
  idleTimeoutMs?: number
  /**
   * At most this many distinct repeated reads run as named prepared statements on each
   * connection (prepared.ts). 0 or unset: none, every statement unnamed (what a pooler in
   * transaction mode needs, and what writes and migrations use).
   */
  preparedStatements?: number
}

// Scoped to our pool, unlike the stock's global pg.types.setTypeParser.
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === pg.types.builtins.INT8
      ? parseInt8
      : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
}

export function createPgDb(opts: PgDbOptions): Db {
  const { schema } = opts
  assertSchemaName(schema)
  const pool = new pg.Pool({
    connectionString: opts.url,
    max: opts.poolSize ?? 10,
    types,
    ...(opts.statementTimeoutMs ? { statement_timeout: opts.statementTimeoutMs } : {}),
    ...(opts.connectTimeoutMs ? { connectionTimeoutMillis: opts.connectTimeoutMs } : {}),
    ...(opts.idleTimeoutMs !== undefined ? { idleTimeoutMillis: opts.idleTimeoutMs } : {}),
  })
  pool.on('error', opts.onPoolError ?? ((err) => console.error('postgres pool error', err)))
  // A checked-out client has no error listener (the pool's is only on idle ones), so a connection
  // lost mid-query, even mid-COMMIT, would crash the process. The query in flight fails with the
  // error and the pool drops the broken client when it is released, so nothing more is needed.
  pool.on('connect', (client) => {
    client.on('error', () => {})
    // Statements made by copyRows run as COPY on this connection (copy.ts).
    installCopy(client)
  })
  const db = new Kysely<DatabaseSchema>({
    dialect: new PostgresDialect({
      pool: opts.preparedStatements
        ? preparingPool(pool, new PreparedStatements(opts.preparedStatements))
        : pool,
      // Awaited before the connection's first query, so nothing runs on a default search_path.
      onCreateConnection: async (conn) => {
        await conn.executeQuery(CompiledQuery.raw(searchPathSql(schema)))
      },
    }),
  })
  const transactions = new TransactionThread({ url: opts.url, schema })
  let closing: Promise<void> | undefined
  return {
    db,
    schema,
    transactions,
    close: () => (closing ??= Promise.all([transactions.close(), db.destroy()]).then(() => {})),
  }
}

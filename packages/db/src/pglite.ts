// A Db over embedded PGlite (Postgres in WASM, on a local directory). PGlite is one session, so
// the driver hands that single connection to one holder at a time: a query, or a whole
// transaction. Caveat as with a pool of one: inside a transaction, use the transaction object;
// a query on the outer db would wait for the transaction to end, which waits for it.
import { mkdir } from 'node:fs/promises'
import { PGlite, types as pgTypes } from '@electric-sql/pglite'
import { pg_trgm } from '@electric-sql/pglite/contrib/pg_trgm'
import {
  CompiledQuery,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  type QueryResult,
  type TransactionSettings,
} from 'kysely'
import { assertSchemaName, parseInt8, searchPathSql, type Db } from './db.ts'
import type { DatabaseSchema } from './schema.ts'

export interface PgliteDbOptions {
  /** Directory holding the database files; created if missing. */
  dataDir: string
  schema: string
}

export function createPgliteDb(opts: PgliteDbOptions): Db {
  const { dataDir, schema } = opts
  assertSchemaName(schema)
  const open = async () => {
    await mkdir(dataDir, { recursive: true })
    const pg = await PGlite.create({
      dataDir,
      extensions: { pg_trgm },
      parsers: { [pgTypes.INT8]: parseInt8 },
    })
    await pg.query(searchPathSql(schema))
    return pg
  }
  const db = new Kysely<DatabaseSchema>({ dialect: new PgliteDialect(open) })
  let closing: Promise<void> | undefined
  return { db, schema, close: () => (closing ??= db.destroy()) }
}

class PgliteDialect implements Dialect {
  #open: () => Promise<PGlite>

  constructor(open: () => Promise<PGlite>) {
    this.#open = open
  }

  createAdapter() {
    return new PostgresAdapter()
  }

  createDriver() {
    return new PgliteDriver(this.#open)
  }

  createIntrospector(db: Kysely<unknown>) {
    return new PostgresIntrospector(db)
  }

  createQueryCompiler() {
    return new PostgresQueryCompiler()
  }
}

class PgliteDriver implements Driver {
  #open: () => Promise<PGlite>
  #pg: PGlite | undefined
  #conn: PgliteConnection | undefined
  #lock = new Lock()

  constructor(open: () => Promise<PGlite>) {
    this.#open = open
  }

  // Kysely calls this lazily before the first query, so a Db that is never used never starts PGlite.
  async init() {
    this.#pg = await this.#open()
    this.#conn = new PgliteConnection(this.#pg)
  }

  async acquireConnection() {
    await this.#lock.acquire()
    if (!this.#conn) {
      this.#lock.release()
      throw new Error('PGlite driver is not initialised or already destroyed')
    }
    return this.#conn
  }

  async beginTransaction(conn: DatabaseConnection, settings: TransactionSettings) {
    let begin = 'start transaction'
    if (settings.isolationLevel) begin += ` isolation level ${settings.isolationLevel}`
    if (settings.accessMode) begin += ` ${settings.accessMode}`
    await conn.executeQuery(CompiledQuery.raw(begin))
  }

  async commitTransaction(conn: DatabaseConnection) {
    await conn.executeQuery(CompiledQuery.raw('commit'))
  }

  async rollbackTransaction(conn: DatabaseConnection) {
    await conn.executeQuery(CompiledQuery.raw('rollback'))
  }

  async savepoint(conn: DatabaseConnection, name: string) {
    await conn.executeQuery(CompiledQuery.raw(`savepoint ${quoteIdent(name)}`))
  }

  async rollbackToSavepoint(conn: DatabaseConnection, name: string) {
    await conn.executeQuery(CompiledQuery.raw(`rollback to savepoint ${quoteIdent(name)}`))
  }

  async releaseSavepoint(conn: DatabaseConnection, name: string) {
    await conn.executeQuery(CompiledQuery.raw(`release savepoint ${quoteIdent(name)}`))
  }

  async releaseConnection() {
    this.#lock.release()
  }

  async destroy() {
    const pg = this.#pg
    this.#pg = undefined
    this.#conn = undefined
    await pg?.close()
  }
}

const DML = new Set(['InsertQueryNode', 'UpdateQueryNode', 'DeleteQueryNode', 'MergeQueryNode'])

class PgliteConnection implements DatabaseConnection {
  #pg: PGlite

  constructor(pg: PGlite) {
    this.#pg = pg
  }

  async executeQuery<R>(compiled: CompiledQuery): Promise<QueryResult<R>> {
    const res = await this.#pg.query<R>(compiled.sql, [...compiled.parameters])
    const affected = res.affectedRows ?? 0
    // Like kysely's pg driver: a row count for writes (raw ones included), none for reads.
    if (DML.has(compiled.query.kind) || affected > 0) {
      return { rows: res.rows, numAffectedRows: BigInt(affected) }
    }
    return { rows: res.rows }
  }

  // PGlite has no cursors over its wire; results are already in memory, so hand them out in chunks.
  async *streamQuery<R>(
    compiled: CompiledQuery,
    chunkSize = 100,
  ): AsyncIterableIterator<QueryResult<R>> {
    const { rows } = await this.executeQuery<R>(compiled)
    for (let i = 0; i < rows.length; i += chunkSize) {
      yield { rows: rows.slice(i, i + chunkSize) }
    }
  }
}

/** FIFO mutual exclusion: each acquire waits for the previous holder's release. */
class Lock {
  #tail: Promise<void> = Promise.resolve()
  #release: (() => void) | undefined

  async acquire(): Promise<void> {
    const previous = this.#tail
    let release: () => void = () => {}
    this.#tail = new Promise<void>((resolve) => {
      release = resolve
    })
    await previous
    this.#release = release
  }

  release(): void {
    const release = this.#release
    this.#release = undefined
    release?.()
  }
}

function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`
}

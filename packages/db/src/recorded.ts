// A Kysely that runs nothing: each statement given to it is kept, in order, to be run later on
// another connection, perhaps in another thread (transaction-thread.ts). Statements made by
// copyRows are kept as the COPY they stand for, with their rows.
//
// Only code that writes may run on it: every statement is answered with no rows, so a read would
// see nothing and an insert's `returning` would return nothing.
import {
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type CompiledQuery,
  type DatabaseConnection,
  type Driver,
  type QueryResult,
} from 'kysely'
import { copyOf, type CopyStatement } from './copy.ts'
import type { DatabaseSchema } from './schema.ts'

/** A statement with its parameters, or a COPY with its rows. */
export type Statement = { text: string; values: unknown[] } | CopyStatement

export interface Recorder {
  db: Kysely<DatabaseSchema>
  /** The statements kept so far, in the order they were made; the recorder starts empty again. */
  take(): Statement[]
}

export function recordingDb(): Recorder {
  let kept: Statement[] = []
  const connection: DatabaseConnection = {
    executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
      const copy = copyOf(query.sql)
      if (copy === 'probe')
        throw new Error('a recorded statement cannot be asked whether it copies')
      kept.push(copy ?? { text: query.sql, values: [...query.parameters] })
      return Promise.resolve({ rows: [] })
    },
    streamQuery() {
      throw new Error('a recorded statement cannot stream')
    },
  }
  const driver: Driver = {
    init: async () => {},
    acquireConnection: async () => connection,
    beginTransaction: () => Promise.reject(new Error('recorded statements run in one transaction')),
    commitTransaction: async () => {},
    rollbackTransaction: async () => {},
    releaseConnection: async () => {},
    destroy: async () => {},
  }
  const db = new Kysely<DatabaseSchema>({
    dialect: {
      createAdapter: () => new PostgresAdapter(),
      createDriver: () => driver,
      createIntrospector: (k) => new PostgresIntrospector(k),
      createQueryCompiler: () => new PostgresQueryCompiler(),
    },
  })
  return {
    db,
    take() {
      const out = kept
      kept = []
      return out
    },
  }
}

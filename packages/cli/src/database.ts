import path from 'node:path'
import { createPgDb, createPgliteDb, migrateToLatest, type Db } from '@openplane/db'
import { logger } from '@openplane/telemetry'
import type { Config } from './config.ts'

/** Postgres when DB_POSTGRES_URL is set, else the embedded PGlite in the data directory. */
export async function openDatabase(config: Config): Promise<Db> {
  let db: Db
  if (config.postgres) {
    db = createPgDb({
      url: config.postgres.url,
      schema: config.schema,
      poolSize: config.postgres.poolSize,
    })
  } else {
    const dataDir = path.resolve(config.dataDir, 'postgres')
    logger.info({ dataDir }, 'no DB_POSTGRES_URL: using the embedded Postgres')
    db = await createPgliteDb({ dataDir, schema: config.schema })
  }
  await migrateToLatest(db)
  return db
}

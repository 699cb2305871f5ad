// Migrating a schema to our latest, whether it is empty, ours, or was created by the stock.
import { Migrator, sql, type Kysely } from 'kysely'
import type { Db } from './db.ts'
import type { DatabaseSchema } from './schema.ts'
import { migrationProvider, STOCK_SCHEMA_MIGRATION } from './migrations/index.ts'

/** The last migration of @atproto/bsky 0.0.280, whose schema migration 0001 reproduces. */
export const PINNED_STOCK_MIGRATION = '_20260904T130000000Z'

export const MIGRATION_TABLE = 'openplane_migration'
export const MIGRATION_LOCK_TABLE = 'openplane_migration_lock'

export interface MigrateResult {
  /** True when this run recorded the stock-schema migration as applied without running it. */
  adopted: boolean
  /** Migrations actually executed by this run, in order (empty when already up to date). */
  applied: string[]
}

/**
 * Brings `db.schema` to our latest migration. An empty schema gets everything. A schema the stock
 * migrated (it has `kysely_migration`) must be at exactly PINNED_STOCK_MIGRATION; its tables are
 * then taken over as they are and only our additive migrations run. Idempotent.
 */
export async function migrateToLatest(db: Db): Promise<MigrateResult> {
  const { schema } = db
  await sql`CREATE SCHEMA IF NOT EXISTS ${sql.id(schema)}`.execute(db.db)
  await ensureTrgm(db.db)

  const isStock = await tableExists(db.db, schema, 'kysely_migration')
  if (isStock) {
    await assertPinnedStock(db.db, schema)
  } else if (
    !(await tableExists(db.db, schema, MIGRATION_TABLE)) &&
    (await tableExists(db.db, schema, 'actor'))
  ) {
    throw new Error(
      `Schema "${schema}" has stock tables but neither the stock's kysely_migration table nor ` +
        `ours (${MIGRATION_TABLE}); refusing to guess its version`,
    )
  }

  const migrator = new Migrator({
    db: db.db,
    provider: migrationProvider({ adoptStock: isStock }),
    migrationTableSchema: schema,
    migrationTableName: MIGRATION_TABLE,
    migrationLockTableName: MIGRATION_LOCK_TABLE,
  })
  const { error, results = [] } = await migrator.migrateToLatest()
  if (error) {
    const failed = results.find((r) => r.status === 'Error')?.migrationName
    const reason = error instanceof Error ? error.message : String(error)
    throw new Error(
      `Migrating schema "${schema}" failed${failed ? ` at ${failed}` : ''}: ${reason}`,
      { cause: error },
    )
  }
  const ran = results.filter((r) => r.status === 'Success').map((r) => r.migrationName)
  const adopted = isStock && ran.includes(STOCK_SCHEMA_MIGRATION)
  return { adopted, applied: adopted ? ran.filter((n) => n !== STOCK_SCHEMA_MIGRATION) : ran }
}

async function assertPinnedStock(db: Kysely<DatabaseSchema>, schema: string): Promise<void> {
  // Kysely applies and orders migrations by name, so the greatest name is the stock's version.
  const { rows } = await sql<{ name: string }>`
    SELECT name FROM ${sql.table(`${schema}.kysely_migration`)} ORDER BY name DESC LIMIT 1
  `.execute(db)
  const found = rows[0]?.name
  if (found !== PINNED_STOCK_MIGRATION) {
    throw new Error(
      `Schema "${schema}" was migrated by a different @atproto/bsky version: its latest stock ` +
        `migration is ${found ?? '(none)'}, expected ${PINNED_STOCK_MIGRATION} (@atproto/bsky 0.0.280)`,
    )
  }
}

async function ensureTrgm(db: Kysely<DatabaseSchema>): Promise<void> {
  if (await hasTrgm(db)) return
  try {
    // In public, like the stock, so every schema sees it.
    await sql`CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public`.execute(db)
  } catch (err) {
    // IF NOT EXISTS still races with a concurrent creator; that one winning is fine.
    if (!(await hasTrgm(db))) throw err
  }
}

async function hasTrgm(db: Kysely<DatabaseSchema>): Promise<boolean> {
  const { rows } = await sql`SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'`.execute(db)
  return rows.length > 0
}

async function tableExists(
  db: Kysely<DatabaseSchema>,
  schema: string,
  table: string,
): Promise<boolean> {
  const { rows } = await sql`
    SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = ${schema} AND tablename = ${table}
  `.execute(db)
  return rows.length > 0
}

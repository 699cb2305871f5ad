// Our writer alone on a schema of its own, for tests that hand it events directly. Identity
// lookups go to a port nothing listens on, so the made-up accounts' handles fail fast.
import { createPgDb, migrateToLatest, type Db } from '@openplane/db'
import { createIdentity, type Identity } from '@openplane/identity'
import { Writer, writerDeps, type Scope } from '@openplane/ingest'
import { PG_URL, uniqueName } from './env.ts'
import { freePort } from './processes.ts'
import { dropSchemas } from './stock-network.ts'

export interface ScratchWriter {
  schema: string
  db: Db
  identity: Identity
  /** The writer, once made (see `scope`). */
  writer: Writer
  close(): Promise<void>
}

/** `scope`: made from the migrated database, before the writer (a community, say). */
export async function openScratchWriter(
  prefix: string,
  scope?: (db: Db) => Promise<Scope>,
): Promise<ScratchWriter> {
  const schema = uniqueName(prefix)
  const db = createPgDb({ url: PG_URL, schema })
  await migrateToLatest(db)
  const identity = createIdentity({
    plcUrl: `http://127.0.0.1:${await freePort()}`,
    allowPrivateNetwork: true,
    timeoutMs: 200,
  })
  const writer = new Writer(db.db, writerDeps(identity, 200), {
    scope: scope && (await scope(db)),
    transactions: db.transactions,
  })
  return {
    schema,
    db,
    identity,
    writer,
    async close() {
      await db.close()
      await dropSchemas([schema])
    },
  }
}

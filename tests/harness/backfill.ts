// Our backfill in-process on a schema of its own: the writer, the repo state table and the
// worker, resolving DIDs through a dev-env PLC.
import { Backfill, BACKFILL_DEFAULTS, listRepos, type BackfillOptions } from '@openplane/backfill'
import { createPgDb, migrateToLatest, type Db } from '@openplane/db'
import { createIdentity } from '@openplane/identity'
import { Writer, writerDeps } from '@openplane/ingest'
import { PG_URL, uniqueName } from './env.ts'
import { dropSchemas } from './stock-network.ts'

export interface OurBackfill {
  schema: string
  db: Db
  writer: Writer
  backfill(opts?: Partial<BackfillOptions>): Backfill
  /** Enqueues every repo the host lists as active; returns how many. */
  enqueueListed(host: string): Promise<number>
  close(opts?: { keepSchema?: boolean }): Promise<void>
}

export async function startOurBackfill(target: {
  plcUrl: string
  testPdsUrl?: string
  schema?: string
}): Promise<OurBackfill> {
  const schema = target.schema ?? uniqueName('op_bf')
  const db = createPgDb({ url: PG_URL, schema, poolSize: 4 })
  await migrateToLatest(db)
  const identity = createIdentity({
    plcUrl: target.plcUrl,
    allowPrivateNetwork: true,
    timeoutMs: 1000,
    testHandles: target.testPdsUrl ? { suffixes: ['.test'], pdsUrl: target.testPdsUrl } : undefined,
  })
  const writer = new Writer(db.db, writerDeps(identity, 1000))
  const make = (opts: Partial<BackfillOptions> = {}) =>
    new Backfill({
      ...BACKFILL_DEFAULTS,
      db: db.db,
      writer,
      idResolver: identity.idResolver,
      ...opts,
    })
  return {
    schema,
    db,
    writer,
    backfill: make,
    async enqueueListed(host) {
      const dids: string[] = []
      for await (const r of listRepos(host)) if (r.active) dids.push(r.did)
      return make().repos.enqueue(dids)
    },
    async close(opts = {}) {
      await db.close()
      if (!opts.keepSchema) await dropSchemas([schema])
    },
  }
}

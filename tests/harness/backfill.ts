// Our backfill in-process on a schema of its own: the writer, the repo state table and the
// worker, resolving DIDs through a dev-env PLC.
import { Backfill, BACKFILL_DEFAULTS, listRepos, type BackfillOptions } from '@openplane/backfill'
import { createPgDb, migrateToLatest, type Db } from '@openplane/db'
import { createIdentity } from '@openplane/identity'
import type { SeedClient, TestNetwork } from '@atproto/dev-env'
import { Writer, writerDeps } from '@openplane/ingest'
import { PG_URL, uniqueName } from './env.ts'
import { createUser, type Did } from './seed.ts'
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
  const writer = new Writer(db.db, writerDeps(identity, 1000), {
    transactions: db.transactions,
  })
  const make = (opts: Partial<BackfillOptions> = {}) =>
    new Backfill({
      ...BACKFILL_DEFAULTS,
      db: db.db,
      writer,
      didDocs: identity.idResolver.did,
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

/** Accounts that post, follow and like one another: repos of a few dozen records each. */
export async function seedMany(
  sc: SeedClient<TestNetwork>,
  opts: { accounts?: number; posts?: number } = {},
): Promise<Did[]> {
  const accounts = opts.accounts ?? 24
  const dids: Did[] = []
  for (let i = 0; i < accounts; i++) dids.push(await createUser(sc, `user${i}`))
  for (const [i, did] of dids.entries()) {
    for (let p = 0; p < (opts.posts ?? 15); p++) await sc.post(did, `post ${p} of user ${i}`)
    await sc.follow(did, dids[(i + 1) % accounts]!)
    await sc.follow(did, dids[(i + 5) % accounts]!)
  }
  for (const [i, did] of dids.entries()) {
    const other = dids[(i + 3) % accounts]!
    for (const post of sc.posts[other]!.slice(0, 3)) await sc.like(did, post.ref)
  }
  return dids
}

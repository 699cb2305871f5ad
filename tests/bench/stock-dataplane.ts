// The stock dataplane (@atproto/bsky's DataPlaneServer) over an existing schema, as its own
// process so benchmarks measure it as they measure ours. With FIREHOSE_URL it also runs the
// stock indexer (RepoSubscription) on that firehose, as the stock deployment does.
// Env: DB_POSTGRES_URL, DB_POSTGRES_SCHEMA, PORT, DB_POOL_SIZE (default 10, the stock's default);
// FIREHOSE_URL (ws://…), PLC_URL, PDS_URL (answers /.well-known/atproto-did by Host header).
import { Database, DataPlaneServer, RepoSubscription } from '@atproto/bsky'
import { IdResolver } from '@atproto/identity'
import { wellKnown } from '../harness/well-known.ts'

const env = (name: string): string => {
  const v = process.env[name]
  if (!v) throw new Error(`${name} is required`)
  return v
}

const dbOpts = { url: env('DB_POSTGRES_URL'), schema: env('DB_POSTGRES_SCHEMA') }
const db = new Database({ ...dbOpts, poolSize: Number(process.env.DB_POOL_SIZE ?? 10) })
const plcUrl = process.env.PLC_URL
const server = await DataPlaneServer.create(db, Number(env('PORT')), plcUrl, globalThis.fetch)
let sub: RepoSubscription | undefined
let indexDb: Database | undefined
if (process.env.FIREHOSE_URL) {
  indexDb = new Database({ ...dbOpts, poolSize: 5 })
  const idResolver = new IdResolver({ plcUrl, fetch: globalThis.fetch })
  const pdsUrl = env('PDS_URL')
  idResolver.handle.resolve = (handle: string) => wellKnown(pdsUrl, handle)
  sub = new RepoSubscription({ service: process.env.FIREHOSE_URL, db: indexDb, idResolver })
  await sub.start()
}
console.log('stock dataplane ready')
const stop = async () => {
  await sub?.destroy()
  await server.destroy()
  await indexDb?.close()
  await db.close()
  process.exit(0)
}
process.once('SIGTERM', () => void stop())
process.once('SIGINT', () => void stop())

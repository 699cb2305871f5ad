// The stock dataplane (@atproto/bsky's DataPlaneServer) over an existing schema, as its own
// process so benchmarks measure it as they measure ours. Env: DB_POSTGRES_URL,
// DB_POSTGRES_SCHEMA, PORT, DB_POOL_SIZE (default 10, the stock's default).
import { Database, DataPlaneServer } from '@atproto/bsky'

const db = new Database({
  url: process.env.DB_POSTGRES_URL!,
  schema: process.env.DB_POSTGRES_SCHEMA!,
  poolSize: Number(process.env.DB_POOL_SIZE ?? 10),
})
const server = await DataPlaneServer.create(db, Number(process.env.PORT))
console.log('stock dataplane ready')
const stop = async () => {
  await server.destroy()
  await db.close()
  process.exit(0)
}
process.once('SIGTERM', () => void stop())
process.once('SIGINT', () => void stop())

// Our dataplane server in-process, reading a given schema. (The e2e tests run it as its own
// process through the CLI instead; route tests only need the rpc surface.)
import { createPgDb, migrateToLatest, type Db } from '@openplane/db'
import { Graph } from '@openplane/graph'
import { createIdentity } from '@openplane/identity'
import { startServer, type DataplaneServer } from '@openplane/server'
import { PG_URL } from './env.ts'

export interface OurServer {
  server: DataplaneServer
  db: Db
  close(): Promise<void>
}

export async function startOurServer(opts: {
  schema: string
  plcUrl: string
  pdsUrl: string
  /** Serve the follow rpcs from the in-memory graph, loaded from the schema as it is now. */
  graph?: boolean
}): Promise<OurServer> {
  const db = createPgDb({ url: PG_URL, schema: opts.schema, poolSize: 5 })
  // The schema was made by the stock: adopting it is part of what these tests exercise.
  await migrateToLatest(db)
  const identity = createIdentity({
    plcUrl: opts.plcUrl,
    allowPrivateNetwork: true,
    testHandles: { suffixes: ['.test'], pdsUrl: opts.pdsUrl },
  })
  const graph = opts.graph ? (await Graph.loadFromPostgres(db)).graph : undefined
  // The rpcs read through a pool of their own with prepared reads, as `openplane start` runs them.
  const reads = createPgDb({
    url: PG_URL,
    schema: opts.schema,
    poolSize: 5,
    preparedStatements: 200,
  })
  const server = await startServer({
    host: '127.0.0.1',
    port: 0,
    ctx: { db: reads.db, identity, graph },
  })
  return {
    server,
    db,
    async close() {
      await server.close()
      await reads.close()
      await db.close()
    },
  }
}

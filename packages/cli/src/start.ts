// Wires the components for `openplane start`.
import { readFileSync } from 'node:fs'
import { sql } from 'kysely'
import { createIdentity } from '@openplane/identity'
import { Indexer, Writer, writerDeps } from '@openplane/ingest'
import { startServer } from '@openplane/server'
import type { Config } from './config.ts'
import { openDatabase } from './database.ts'

export interface Running {
  url: string
  stop(): Promise<void>
}

export async function start(config: Config): Promise<Running> {
  const db = await openDatabase(config)
  const identity = createIdentity({
    plcUrl: config.plcUrl,
    allowPrivateNetwork: config.allowPrivateNetwork,
    testHandles: config.testHandles,
  })
  const indexers: Indexer[] = []
  if (config.indexer) {
    const writer = new Writer(db.db, writerDeps(identity))
    for (const source of config.firehoseUrls) {
      const indexer = new Indexer({
        source,
        db: db.db,
        writer,
        idResolver: identity.idResolver,
        verify: config.verifyCommits,
        batchSize: config.batchSize,
        batchWaitMs: config.batchWaitMs,
        initialCursor: config.initialCursor,
      })
      await indexer.start()
      indexers.push(indexer)
    }
  }
  const server = await startServer({
    host: config.host,
    port: config.port,
    tls: config.tls
      ? { key: readFileSync(config.tls.keyFile), cert: readFileSync(config.tls.certFile) }
      : undefined,
    ctx: { db: db.db, identity },
    // Ready = Postgres answers; indexer state is reported for dashboards and alerts.
    health: async () => {
      await sql`select 1`.execute(db.db)
      return { ready: true, indexers: indexers.map((i) => i.state()) }
    },
    control: {
      // Lets tests and operators wait until a given firehose seq is applied.
      async waitForSeq(source: string, seq: number) {
        const indexer = indexers.find((i) => i.state().source === source) ?? indexers[0]
        if (!indexer) throw new Error('no indexer is running')
        await indexer.waitFor(seq)
      },
    },
  })
  return {
    url: server.url,
    async stop() {
      await server.close()
      for (const i of indexers) await i.stop()
      await db.close()
    },
  }
}

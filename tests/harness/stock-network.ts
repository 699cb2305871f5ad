// A dev-env TestNetwork (PLC + PDS + stock AppView + stock dataplane and indexer) plus clients
// for both dataplanes. Route tests point our server at the schema the stock indexer fills and
// compare the two answers rpc by rpc.
import { BasicHostList, createDataPlaneClient } from '@atproto/bsky'
import { TestNetwork, type SeedClient } from '@atproto/dev-env'
import pg from 'pg'
import { PG_URL, REDIS_HOST, uniqueName } from './env.ts'

export type DataplaneClient = ReturnType<typeof createDataPlaneClient>

export interface StockNetwork {
  network: TestNetwork
  sc: SeedClient<TestNetwork>
  /** The Postgres schema holding the stock AppView's data (appview_<name>). */
  schema: string
  /** The stock dataplane's own URL (HTTP/1.1 only). */
  stockUrl: string
  stock: DataplaneClient
  clientFor(url: string, httpVersion?: '1.1' | '2'): DataplaneClient
  close(): Promise<void>
}

export async function startStockNetwork(
  opts: {
    /** The PDS's replay window: older cursors get OutdatedCursor (default: a day). */
    pdsReplayWindowMs?: number
  } = {},
): Promise<StockNetwork> {
  process.env.LOG_ENABLED ??= 'false'
  process.env.REDIS_HOST ??= REDIS_HOST
  const name = uniqueName('op')
  const network = await TestNetwork.create({
    dbPostgresUrl: PG_URL,
    dbPostgresSchema: name,
    ...(opts.pdsReplayWindowMs ? { pds: { repoBackfillLimitMs: opts.pdsReplayWindowMs } } : {}),
  })
  const stockUrl = network.bsky.ctx.cfg.dataplaneUrls[0]!
  const clientFor = (url: string, httpVersion: '1.1' | '2' = '2') =>
    createDataPlaneClient(new BasicHostList([url]), { httpVersion })
  return {
    network,
    sc: network.getSeedClient(),
    schema: `appview_${name}`,
    stockUrl,
    stock: clientFor(stockUrl, '1.1'),
    clientFor,
    async close() {
      await network.close()
      await dropSchemas([`appview_${name}`, `bsync_${name}`, `ozone_${name}`])
    },
  }
}

export async function dropSchemas(schemas: string[]): Promise<void> {
  const client = new pg.Client({ connectionString: PG_URL })
  await client.connect()
  try {
    for (const s of schemas) await client.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`)
  } finally {
    await client.end()
  }
}

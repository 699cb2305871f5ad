// `openplane backfill` as an operator runs it: killed with SIGKILL while repos are being written,
// then run again. The second run fetches only what the first did not mark done, and the tables
// equal those of a backfill that ran through once.
import { spawn } from 'node:child_process'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { TestNetwork } from '@atproto/dev-env'
import { seedMany, startOurBackfill, type OurBackfill } from '../harness/backfill.ts'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { diffSchemas, INDEXED_TABLES } from '../harness/indexer.ts'
import { dropSchemas, startStockNetwork, type StockNetwork } from '../harness/stock-network.ts'

const root = path.resolve(import.meta.dirname, '../..')
function backfillProcess(schema: string, net: TestNetwork, kill?: () => Promise<boolean>) {
  const proc = spawn(
    process.execPath,
    ['packages/cli/src/main.ts', 'backfill', '--from', net.pds.url],
    {
      cwd: root,
      env: {
        ...process.env,
        DB_POSTGRES_URL: PG_URL,
        DB_POSTGRES_SCHEMA: schema,
        DATAPLANE_PLC_URL: net.plc.url,
        DATAPLANE_ALLOW_PRIVATE_NETWORK: 'true',
        DATAPLANE_TEST_HANDLE_PDS_URL: net.pds.url,
        DATAPLANE_BACKFILL_CONCURRENCY: '1',
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  )
  let out = ''
  proc.stdout.on('data', (d) => (out += d))
  proc.stderr.on('data', (d) => (out += d))
  const exited = new Promise<{ code: number | null; signal: string | null }>((r) =>
    proc.once('exit', (code, signal) => r({ code, signal })),
  )
  const watching = kill
    ? (async () => {
        while (proc.exitCode === null && !(await kill()))
          await new Promise((r) => setTimeout(r, 20))
        proc.kill('SIGKILL')
      })()
    : Promise.resolve()
  return { exited: exited.then(async (e) => (await watching, { ...e, out })) }
}

describe('backfill: killed and resumed', () => {
  let net: StockNetwork
  let whole: OurBackfill
  const schema = uniqueName('op_bfk')
  beforeAll(async () => {
    net = await startStockNetwork()
    await seedMany(net.sc)
    await net.network.processAll()
    whole = await startOurBackfill({
      plcUrl: net.network.plc.url,
      testPdsUrl: net.network.pds.url,
    })
    await whole.enqueueListed(net.network.pds.url)
    await whole.backfill({ concurrency: 1 }).run({ drain: true })
  })
  afterAll(async () => {
    await whole?.close()
    await dropSchemas([schema])
    await net?.close()
  })

  it('resumes after SIGKILL with nothing doubled or lost', async () => {
    const probe = await startOurBackfill({ plcUrl: net.network.plc.url, schema })
    const doneNow = async () => {
      const c = await probe
        .backfill()
        .repos.counts()
        .catch(() => undefined)
      return !!c && c.done >= 3
    }
    const first = await backfillProcess(schema, net.network, doneNow).exited
    expect(first.signal, first.out).toBe('SIGKILL')
    const mid = await probe.backfill().repos.counts()
    expect(mid.done).toBeGreaterThanOrEqual(3)
    expect(mid.pending).toBeGreaterThan(0)
    const second = await backfillProcess(schema, net.network).exited
    expect(second.code, second.out).toBe(0)
    expect(await probe.backfill().repos.counts()).toMatchObject({ pending: 0, failed: 0 })
    // Repos done before the kill were not fetched again.
    const refetched = await probe.db.db
      .selectFrom('openplane_repo')
      .select('did')
      .where('attempts', '>', 1)
      .execute()
    expect(refetched).toEqual([])
    const diffs = await diffSchemas(whole.schema, schema, INDEXED_TABLES, () => ['indexedAt'])
    await probe.close({ keepSchema: true })
    expect(diffs).toEqual([])
  })
})

// Postgres restarted (a real server restart, on a private cluster) while the dataplane ingests a
// live stream and serves reads: reads answer `unavailable` while it is away, never `unknown` or
// `internal`; the process stays up; ingest resumes from its committed cursor by itself; and the
// tables end equal to an uninterrupted run over the same stream, nothing lost or doubled.
import { BasicHostList, createDataPlaneClient } from '@atproto/bsky'
import { Code, ConnectError } from '@connectrpc/connect'
import { ReplayServer, type CorpusReader } from '@openplane/sim'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { recordTestCorpus, type TestCorpus } from '../harness/corpus.ts'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { diffSchemas, INDEXED_TABLES, startIndexerOn, type OurIndexer } from '../harness/indexer.ts'
import { startPrivatePostgres, type PrivatePostgres } from '../harness/private-postgres.ts'
import { appliedSeq, spawnDataplane, waitForSeq, type Child } from '../harness/processes.ts'
import { dropSchemas } from '../harness/stock-network.ts'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

describe('Postgres restarted under reads and ingest', () => {
  const schema = uniqueName('op_pgrestart')
  let recorded: TestCorpus | undefined
  let corpus: CorpusReader
  let live: ReplayServer | undefined
  let whole: ReplayServer | undefined
  let pg: PrivatePostgres | undefined
  let dataplane: Child | undefined
  let reference: OurIndexer | undefined

  beforeAll(async () => {
    recorded = await recordTestCorpus({ name: 'pg-restart', repos: 150, events: 4000, seed: 13 })
    corpus = recorded.corpus
    pg = await startPrivatePostgres()
  }, 120_000)

  afterAll(async () => {
    await dataplane?.stop('SIGKILL')
    await reference?.close()
    await live?.close()
    await whole?.close()
    await pg?.destroy()
    await recorded?.close()
    await dropSchemas([schema])
  })

  it('answers unavailable meanwhile, stays up, resumes, and loses or doubles nothing', async () => {
    // The stream advances at 400 events/s: about 10 s long, so the restart falls inside it.
    live = await ReplayServer.start({ corpus, rate: 400 })
    dataplane = await spawnDataplane({
      pgUrl: pg!.url,
      schema,
      plcUrl: live.httpUrl,
      pdsUrl: live.httpUrl,
      extra: {
        DATAPLANE_FIREHOSE_URLS: live.url,
        DATAPLANE_FIREHOSE_CURSOR: '0',
        DATAPLANE_BATCH_SIZE: '100',
        DB_POSTGRES_CONNECT_TIMEOUT_MS: '1000',
      },
    })
    const client = createDataPlaneClient(new BasicHostList([dataplane.url]), { httpVersion: '2' })

    // Reads all along: about 50 a second, each answer's code tallied.
    const codes = new Map<string, number>()
    let reading = true
    const readLoop = (async () => {
      for (let i = 0; reading; i++) {
        const code = await client.getActors({ dids: [`did:plc:reader${i % 50}`] }).then(
          () => 'ok',
          (e: unknown) => Code[ConnectError.from(e).code] ?? 'other',
        )
        codes.set(code, (codes.get(code) ?? 0) + 1)
        await sleep(20)
      }
    })()

    const lastSeq = corpus.seqAt(corpus.frames - 1)
    while ((await appliedSeq(dataplane.url)) < lastSeq / 4) await sleep(50)

    await pg!.stop('fast')
    await sleep(3000)
    const during = new Map(codes)
    await pg!.start()

    await waitForSeq(dataplane.url, lastSeq)
    // Reads are served again.
    const before = codes.get('ok') ?? 0
    for (let i = 0; i < 100 && (codes.get('ok') ?? 0) < before + 5; i++) await sleep(100)
    reading = false
    await readLoop

    expect(during.get('Unavailable') ?? 0).toBeGreaterThan(0)
    expect(codes.get('ok') ?? 0).toBeGreaterThan(before)
    // Nothing but ok and unavailable (a read cut mid-statement by the restart included).
    expect([...codes.keys()].filter((c) => c !== 'ok' && c !== 'Unavailable')).toEqual([])
    // The process stayed up through it.
    expect(dataplane.proc.exitCode).toBeNull()
    expect(dataplane.output()).toMatch(/batch could not be written; retrying/)

    // Every table equal to an uninterrupted run over the same stream.
    await pg!.copySchemaTo(schema, PG_URL)
    whole = await ReplayServer.start({ corpus })
    reference = await startIndexerOn(
      {
        source: whole.url,
        plcUrl: whole.httpUrl,
        testPdsUrl: whole.httpUrl,
        headSeq: async () => lastSeq,
      },
      { batchSize: 100 },
    )
    await reference.catchUp()
    expect(await diffSchemas(reference.schema, schema, INDEXED_TABLES)).toEqual([])
  }, 180_000)
})

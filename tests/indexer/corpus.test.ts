// A realistic recorded firehose (the network's mix: likes, threads, quotes, mentions, embeds,
// reposts, follows and blocks, lists, profile edits, deletes of each kind, identity and account
// events, over a power law of repos) replayed to the stock indexer and to ours: every indexed
// table must end equal. The stock is fed one frame at a time (its per-repo parallelism would
// otherwise race replies against their parents); ours reads the replay server as it would a
// relay, in batches. Then a dataplane process indexing the same stream in bulk batches is killed
// with SIGKILL mid-stream and restarted: it must end with the same tables as the uninterrupted run.
import { ReplayServer, type CorpusReader } from '@openplane/sim'
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { recordTestCorpus, type TestCorpus } from '../harness/corpus.ts'
import { StockIndexer } from '../harness/fuzz/stock.ts'
import { closeFuzzPool } from '../harness/fuzz/schema.ts'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { diffSchemas, INDEXED_TABLES, startIndexerOn, type OurIndexer } from '../harness/indexer.ts'
import { spawnDataplane, waitForSeq, type Child } from '../harness/processes.ts'
import { dropSchemas } from '../harness/stock-network.ts'

const EVENTS = 1500

describe('a realistic recorded firehose', () => {
  let recorded: TestCorpus | undefined
  let corpus: CorpusReader
  let server: ReplayServer
  let stock: StockIndexer
  let ours: OurIndexer | undefined
  let first: Child | undefined
  let second: Child | undefined
  const killedSchema = uniqueName('op_corpus_kill')

  beforeAll(async () => {
    recorded = await recordTestCorpus({ name: 'indexer', repos: 250, events: EVENTS, seed: 21 })
    corpus = recorded.corpus
    server = await ReplayServer.start({ corpus })
    stock = await StockIndexer.start(server.httpUrl)
  })

  afterAll(async () => {
    await first?.stop('SIGKILL')
    await second?.stop()
    await dropSchemas([killedSchema])
    await ours?.close()
    await stock?.close()
    await server?.close()
    await recorded?.close()
    await closeFuzzPool()
  })

  it('leaves every table as the stock indexer does', async () => {
    const frames: { seq: number; bytes: Uint8Array }[] = []
    for await (const m of corpus.messages()) frames.push(m)
    await stock.play(frames)
    ours = await startIndexerOn(
      {
        source: server.url,
        plcUrl: server.httpUrl,
        testPdsUrl: server.httpUrl,
        headSeq: async () => corpus.summary.last_seq,
      },
      { batchSize: 200 },
    )
    await ours.catchUp()
    const diffs = await diffSchemas(stock.schema, ours.schema, INDEXED_TABLES)
    expect(diffs).toEqual([])
    // Not equal by being empty: identities resolved, and every kind of row is there.
    const count = async (query: string) =>
      Number((await sql.raw<{ n: string }>(query).execute(ours!.db.db)).rows[0]!.n)
    expect(
      await count(`select count(*) n from actor where handle like 'user%.sim.test'`),
    ).toBeGreaterThan(100)
    for (const table of [
      'like',
      'post',
      'repost',
      'follow',
      'actor_block',
      'list_item',
      'quote',
      'notification',
    ]) {
      expect(await count(`select count(*) n from "${table}"`), table).toBeGreaterThan(0)
    }
    expect(
      await count(`select count(*) n from post where "replyParent" is not null`),
    ).toBeGreaterThan(50)
  }, 300_000)

  it('ends with the same tables after kill -9 during bulk writes and a restart', async () => {
    expect(ours, 'the uninterrupted run comes first').toBeDefined()
    const head = corpus.summary.last_seq
    const env = {
      pgUrl: PG_URL,
      schema: killedSchema,
      plcUrl: server.httpUrl,
      pdsUrl: server.httpUrl,
      extra: { DATAPLANE_FIREHOSE_CURSOR: '0', DATAPLANE_BATCH_SIZE: '150' },
    }
    const cursor = async () => {
      const { rows } = await sql<{ seq: string }>`
        select seq from ${sql.table(`${killedSchema}.openplane_cursor`)}`
        .execute(ours!.db.db)
        .catch(() => ({ rows: [] as { seq: string }[] }))
      return Number(rows[0]?.seq ?? -1)
    }
    first = await spawnDataplane(env)
    // Killed once some batches, but not all, have committed: most likely inside a batch's writes.
    while ((await cursor()) < head / 3) await new Promise((r) => setTimeout(r, 2))
    first.proc.kill('SIGKILL')
    await first.stop('SIGKILL')
    const killedAt = await cursor()
    expect(killedAt).toBeGreaterThan(0)
    expect(killedAt).toBeLessThan(head)

    second = await spawnDataplane(env)
    await waitForSeq(second.url, head)
    expect(await diffSchemas(ours!.schema, killedSchema, INDEXED_TABLES)).toEqual([])
  }, 300_000)
})

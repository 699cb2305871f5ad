// The toolkit serves whole repos (listRepos, getRepo) of a recorded network. A backfill of every
// repo, verifying each commit's signature against the documents the replay server answers, must
// leave the tables the stock indexer leaves after the same network's firehose, but for the time
// of indexing, what only the firehose carries (accounts deactivated in the stream), and what the
// stock derives from history a repo no longer holds (README, Backfill: what comes out).
import { CorpusRepos, ReplayServer } from '@openplane/sim'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startOurBackfill, type OurBackfill } from '../harness/backfill.ts'
import { recordTestCorpus, type TestCorpus } from '../harness/corpus.ts'
import { closeFuzzPool } from '../harness/fuzz/schema.ts'
import { StockIndexer } from '../harness/fuzz/stock.ts'
import { formatTableDiff, INDEXED_TABLES, tableDiffs } from '../harness/indexer.ts'

/** Set by the time of indexing, or only by the firehose (an account deactivated in the stream). */
const unequal = () => ['indexedAt', 'upstreamStatus']

/**
 * What the stock derives from records the repos no longer hold: a reply judged while its since
 * deleted parent existed (and the notifications it made), which of two duplicates came first
 * after one was updated or deleted, zero-count aggregates of deleted records' subjects, quote
 * counts by the CID a post had when quoted, a repost's feed item dropped with a post re-created.
 */
const HISTORY = new Set([
  'post',
  'duplicate_record',
  'profile_agg',
  'post_agg',
  'quote',
  'feed_item',
  'notification',
])
const JUDGEMENT = ['invalidReplyRoot', 'violatesThreadGate']

describe('backfill from the toolkit', () => {
  let recorded: TestCorpus | undefined
  let server: ReplayServer
  let stock: StockIndexer
  let ours: OurBackfill
  let repos: CorpusRepos
  beforeAll(async () => {
    recorded = await recordTestCorpus({ name: 'backfill', repos: 120, events: 1200, seed: 7 })
    const corpus = recorded.corpus
    repos = await CorpusRepos.load(corpus)
    server = await ReplayServer.start({ corpus, repos })
    stock = await StockIndexer.start(server.httpUrl)
    const frames: { seq: number; bytes: Uint8Array }[] = []
    for await (const m of corpus.messages()) frames.push(m)
    await stock.play(frames)
    ours = await startOurBackfill({ plcUrl: server.httpUrl, testPdsUrl: server.httpUrl })
    await ours.enqueueListed(server.httpUrl)
    await ours.backfill({ verify: true }).run({ drain: true })
  }, 300_000)
  afterAll(async () => {
    await ours?.close()
    await stock?.close()
    await server?.close()
    await recorded?.close()
    await closeFuzzPool()
  })

  it('served every repo, verified', async () => {
    const counts = await ours.backfill().repos.counts()
    expect(counts).toEqual({ pending: 0, done: repos.ids().length, failed: 0, purge: 0 })
    expect(server.served.repos).toBe(repos.ids().length)
  })

  it.each(INDEXED_TABLES.filter((t) => !HISTORY.has(t)))('%s', async (table) => {
    const diffs = await tableDiffs(stock.schema, ours.schema, [table], unequal)
    expect(diffs.map((d) => formatTableDiff(d, stock.schema, ours.schema))).toEqual([])
  })

  it('holds the same posts, but for replies whose parent is gone', async () => {
    const judged = (t: string) => [...unequal(), ...(t === 'post' ? JUDGEMENT : [])]
    const diffs = await tableDiffs(stock.schema, ours.schema, ['post'], judged)
    expect(diffs.map((d) => formatTableDiff(d, stock.schema, ours.schema))).toEqual([])
  })
})

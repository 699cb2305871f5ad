// Jetstream as the source: the toolkit serves one recorded network both as a firehose and as
// Jetstream (JSON, with and without its zstd dictionary). Our indexer fed each must leave the same
// tables, but for the commit CID Jetstream does not carry; so must a community deployment fed
// each (its scope applies to every source alike).
import { JetstreamView, ReplayServer, wantedBy } from '@openplane/sim'
import { indexedCollections } from '@openplane/plugins'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { recordTestCorpus, type TestCorpus } from '../harness/corpus.ts'
import {
  formatTableDiff,
  INDEXED_TABLES,
  startIndexerOn,
  tableDiffs,
  type OurIndexer,
} from '../harness/indexer.ts'

describe('Jetstream vs the firehose', () => {
  let recorded: TestCorpus | undefined
  let server: ReplayServer
  let firehose: OurIndexer
  const jetstream: Record<'zstd' | 'plain', OurIndexer> = {} as never
  const community: Record<'firehose' | 'jetstream', OurIndexer> = {} as never
  let members: string[] = []

  beforeAll(async () => {
    recorded = await recordTestCorpus({ name: 'jetstream', repos: 150, events: 3000, seed: 11 })
    const { corpus } = recorded
    server = await ReplayServer.start({ corpus })
    const target = { source: server.url, plcUrl: server.httpUrl, testPdsUrl: server.httpUrl }
    // The tables compared include when each actor's handle was first checked: a lookup timing
    // out on a loaded machine would move that to a later event on one side only.
    const patient = { identityTimeoutMs: 10_000 }
    const lastSeq = corpus.seqAt(corpus.frames - 1)
    firehose = await startIndexerOn(target, patient)
    // The last message Jetstream sends: the newest frame with an op the plugins index.
    const view = new JetstreamView(corpus)
    const wanted = indexedCollections()
    let lastTimeUs = 0
    let i = 0
    const accounts = new Set<string>()
    for await (const { bytes } of corpus.messages()) {
      const sent = (await view.messages(i, bytes)).filter(
        (m) => m.kind !== 'commit' || wantedBy(wanted, m.commit.collection),
      )
      if (sent.length) lastTimeUs = view.timeUs(i)
      for (const m of sent) accounts.add(m.did)
      i++
    }
    for (const kind of ['zstd', 'plain'] as const) {
      jetstream[kind] = await startIndexerOn(target, {
        ...patient,
        jetstream: { compress: kind === 'zstd' },
        initialCursor: view.timeUs(0),
      })
    }
    // A community of a tenth of the network's accounts, on each source.
    members = [...accounts].filter((_, n) => n % 10 === 0)
    const scope = { dids: members, lists: [], follows: false }
    community.firehose = await startIndexerOn(target, { ...patient, community: scope })
    community.jetstream = await startIndexerOn(target, {
      ...patient,
      jetstream: { compress: true },
      initialCursor: view.timeUs(0),
      community: scope,
    })
    await Promise.all([
      firehose.indexer.waitFor(lastSeq),
      jetstream.zstd.indexer.waitFor(lastTimeUs),
      jetstream.plain.indexer.waitFor(lastTimeUs),
      community.firehose.indexer.waitFor(lastSeq),
      community.jetstream.indexer.waitFor(lastTimeUs),
    ])
  }, 300_000)
  afterAll(async () => {
    await firehose?.close()
    await jetstream.zstd?.close()
    await jetstream.plain?.close()
    await community.firehose?.close()
    await community.jetstream?.close()
    await server?.close()
    await recorded?.close()
  })

  it('indexed the network, from fewer bytes through Jetstream, fewer again with zstd', async () => {
    const posts = await firehose.db.db.selectFrom('post').select('uri').execute()
    expect(posts.length).toBeGreaterThan(100)
    const bytes = Object.fromEntries(server.status().consumers.map((c) => [c.kind, c.bytes]))
    expect(bytes.jetstream).toBeLessThan(bytes.firehose!)
    expect(bytes['jetstream+zstd']).toBeLessThan(bytes.jetstream!)
  })

  // Jetstream carries no commit CID. Handles do not come from either stream: they are resolved
  // beside it under a deadline, which a busy machine can miss in one run and not another.
  const setAside = (t: string) => (t === 'actor' ? ['commitCid', 'handle'] : ['commitCid'])

  it.each(INDEXED_TABLES)('%s', async (table) => {
    for (const kind of ['zstd', 'plain'] as const) {
      const diffs = await tableDiffs(firehose.schema, jetstream[kind].schema, [table], setAside)
      expect(diffs.map((d) => formatTableDiff(d, 'firehose', `jetstream ${kind}`))).toEqual([])
    }
    const diffs = await tableDiffs(
      community.firehose.schema,
      community.jetstream.schema,
      [table],
      setAside,
    )
    expect(diffs.map((d) => formatTableDiff(d, 'community, firehose', 'jetstream'))).toEqual([])
  })

  it("indexed only the community's accounts", async () => {
    const authors = await community.jetstream.db.db
      .selectFrom('record')
      .select('did')
      .distinct()
      .execute()
    expect(authors.length).toBeGreaterThan(0)
    const inside = new Set(members)
    expect(authors.filter((a) => !inside.has(a.did))).toEqual([])
  })
})

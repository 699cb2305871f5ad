// Bad input never stops the indexer: a recorded corpus of broken frames and invalid records,
// interleaved with valid events, is replayed; every valid event is applied, every bad one is
// skipped and counted, and the cursor moves past all of them.
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { registry } from '@openplane/telemetry'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startFakeRelay, parseCorpus, type FakeRelay } from '../harness/fake-relay.ts'
import { startIndexerOn, type OurIndexer } from '../harness/indexer.ts'
import { freePort } from '../harness/processes.ts'

const corpus = parseCorpus(
  readFileSync(path.resolve(import.meta.dirname, '../fixtures/firehose/malformed.jsonl'), 'utf8'),
)
const GOOD = 'did:plc:goodgoodgoodgoodgoodgood'

async function metric(name: string, labels: Record<string, string>): Promise<number> {
  const m = await registry.getSingleMetric(name)?.get()
  return (m?.values ?? [])
    .filter((v) => Object.entries(labels).every(([k, val]) => v.labels[k] === val))
    .reduce((sum, v) => sum + v.value, 0)
}

describe('malformed firehose input', () => {
  let relay: FakeRelay
  let ours: OurIndexer
  const before: Record<string, number> = {}

  beforeAll(async () => {
    before.malformed = await metric('openplane_firehose_frames_total', { outcome: 'malformed' })
    before.invalid = await metric('openplane_indexer_ops_total', { outcome: 'invalid' })
    before.error = await metric('openplane_indexer_ops_total', { outcome: 'error' })
    relay = await startFakeRelay(corpus)
    // Nothing listens on this PLC port: identity lookups for the made-up DIDs fail fast.
    ours = await startIndexerOn({
      source: relay.url,
      plcUrl: `http://127.0.0.1:${await freePort()}`,
      headSeq: async () => Math.max(...corpus.map((f) => f.seq)),
    })
    await ours.catchUp()
  })
  afterAll(async () => {
    await ours?.close()
    await relay?.close()
  })

  it('applies the valid events around the bad ones', async () => {
    const records = await ours.db.db.selectFrom('record').select('uri').orderBy('uri').execute()
    expect(records.map((r) => r.uri)).toEqual([
      `at://${GOOD}/app.bsky.feed.like/3aaaaaaaaaa06`,
      `at://${GOOD}/app.bsky.feed.post/3aaaaaaaaaa15`,
    ])
    const likes = await ours.db.db.selectFrom('like').select('uri').execute()
    expect(likes).toHaveLength(1)
    const posts = await ours.db.db.selectFrom('post').select('text').execute()
    expect(posts.map((p) => p.text)).toEqual(['last'])
  })

  it('moves the cursor past every frame and keeps running', async () => {
    const row = await ours.db.db.selectFrom('openplane_cursor').select('seq').executeTakeFirst()
    expect(Number(row?.seq)).toBe(16)
    expect(ours.indexer.state().seq).toBe(16)
  })

  it('counts what it skipped', async () => {
    const malformed =
      (await metric('openplane_firehose_frames_total', { outcome: 'malformed' })) -
      before.malformed!
    // garbage, single part, non-map header, no blocks, bad DID
    expect(malformed).toBe(5)
    expect(await metric('openplane_firehose_dropped_ops_total', {})).toBeGreaterThanOrEqual(1)
    const invalid =
      (await metric('openplane_indexer_ops_total', { outcome: 'invalid' })) - before.invalid!
    // text is a number, oversized text, like without subject
    expect(invalid).toBe(3)
    // The NUL bytes are rejected by Postgres, isolated and counted as errors.
    expect(
      await metric('openplane_indexer_ops_total', { outcome: 'error' }),
    ).toBeGreaterThanOrEqual(2)
  })
})

// Bad Jetstream input never stops the indexer: messages that are not zstd, not JSON or lack what
// an event needs are counted and skipped, invalid records are refused as on the firehose, and
// the valid messages around them (plain or zstd-compressed) are applied. A reconnect resumes at
// the last time_us taken, and a restart at the committed one.
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { compressMessage } from '@openplane/jetstream'
import { registry } from '@openplane/telemetry'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { WebSocketServer } from 'ws'
import { startIndexerOn, type OurIndexer } from '../harness/indexer.ts'
import { freePort } from '../harness/processes.ts'

const DID = 'did:plc:jetjetjetjetjetjetjetjetj'
const CID = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
const T = 1_780_000_000_000_000
const at = (i: number) => T + i * 1000
const createdAt = '2026-05-28T12:00:00.000Z'

const commit = (i: number, commitBody: Record<string, unknown>) =>
  JSON.stringify({
    did: DID,
    time_us: at(i),
    kind: 'commit',
    commit: { rev: `3k${i}`, ...commitBody },
  })
const post = (i: number, text: unknown) =>
  commit(i, {
    operation: 'create',
    collection: 'app.bsky.feed.post',
    rkey: `3post${String(i).padStart(8, 'a')}`,
    record: { $type: 'app.bsky.feed.post', text, createdAt },
    cid: CID,
  })

/** [time_us or undefined, bytes as sent, text or binary]. */
const MESSAGES: [number | undefined, Buffer | string][] = [
  [at(1), post(1, 'first')],
  [undefined, Buffer.from([0x00, 0x01, 0x02, 0xff])],
  [undefined, Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x01, 0x02])],
  [undefined, '{"did": "did:plc:x", "kind": "commit"'],
  [undefined, JSON.stringify({ did: DID, kind: 'commit', commit: {} })],
  [at(6), commit(6, { operation: 'create', collection: 'app.bsky.feed.post', rkey: '3x' })],
  [at(7), commit(7, { operation: 'create', collection: 'app.bsky.feed.like' })],
  [at(8), post(8, 42)],
  [
    at(9),
    JSON.stringify({
      did: DID,
      time_us: at(9),
      kind: 'identity',
      identity: { did: DID, seq: 9, time: createdAt },
    }),
  ],
  [at(10), JSON.stringify({ did: DID, time_us: at(10), kind: 'future-kind' })],
  [at(11), compressMessage(post(11, 'compressed'))],
  [
    at(12),
    JSON.stringify({
      did: DID,
      time_us: at(12),
      kind: 'account',
      account: { active: true, did: DID, seq: 12, time: createdAt },
    }),
  ],
  [at(13), post(13, 'last')],
]

async function metric(name: string, labels: Record<string, string>): Promise<number> {
  const m = await registry.getSingleMetric(name)?.get()
  return (m?.values ?? [])
    .filter((v) => Object.entries(labels).every(([k, val]) => v.labels[k] === val))
    .reduce((sum, v) => sum + v.value, 0)
}

describe('Jetstream input', () => {
  let server: http.Server
  let url: string
  let ours: OurIndexer
  const cursors: (string | null)[] = []
  const before: Record<string, number> = {}

  const open = async (schema?: string) =>
    startIndexerOn(
      { source: url, plcUrl: `http://127.0.0.1:${await freePort()}` },
      { schema, jetstream: { compress: true }, initialCursor: at(0) },
    )

  beforeAll(async () => {
    before.malformed = await metric('openplane_firehose_frames_total', { outcome: 'malformed' })
    before.invalid = await metric('openplane_indexer_ops_total', { outcome: 'invalid' })
    server = http.createServer((_, res) => res.writeHead(404).end())
    const wss = new WebSocketServer({ server, path: '/subscribe' })
    wss.on('connection', (ws, req) => {
      const q = new URL(req.url ?? '/', 'http://x').searchParams
      cursors.push(q.get('cursor'))
      const cursor = Number(q.get('cursor') ?? 0)
      // Inclusive, as Jetstream: from the first event at or after the cursor.
      const from = MESSAGES.findIndex(([t]) => t !== undefined && t >= cursor)
      for (const [, bytes] of MESSAGES.slice(Math.max(0, from))) ws.send(bytes)
    })
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()))
    url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}`
    ours = await open()
    await ours.indexer.waitFor(at(13))
  })
  afterAll(async () => {
    await ours?.close()
    await new Promise((r) => server.close(r))
  })

  it('applies the valid messages around the bad ones', async () => {
    const posts = await ours.db.db.selectFrom('post').select('text').orderBy('text').execute()
    expect(posts.map((p) => p.text)).toEqual(['compressed', 'first', 'last'])
    expect(
      Number(
        (await ours.db.db.selectFrom('openplane_cursor').select('seq').executeTakeFirst())?.seq,
      ),
    ).toBe(at(13))
  })

  it('counts what it skipped', async () => {
    const malformed =
      (await metric('openplane_firehose_frames_total', { outcome: 'malformed' })) -
      before.malformed!
    // not zstd or JSON, corrupt zstd, cut JSON, no time_us, create without record, no rkey
    expect(malformed).toBe(6)
    const invalid =
      (await metric('openplane_indexer_ops_total', { outcome: 'invalid' })) - before.invalid!
    expect(invalid).toBe(1)
  })

  it('resumes at the committed time_us after a restart, changing nothing', async () => {
    const schema = ours.schema
    const rows = async () =>
      (await ours.db.db.selectFrom('record').select(['uri', 'cid']).orderBy('uri').execute()).length
    const n = await rows()
    await ours.close({ keepSchema: true })
    const connections = cursors.length
    const applied = () => metric('openplane_indexer_events_total', { type: 'commit' })
    const appliedBefore = await applied()
    ours = await open(schema)
    while (cursors.length === connections) await new Promise((r) => setTimeout(r, 20))
    expect(cursors[connections]).toBe(String(at(13)))
    // The replayed last message is applied again, harmlessly.
    while ((await applied()) === appliedBefore) await new Promise((r) => setTimeout(r, 20))
    expect(await rows()).toBe(n)
    const posts = await ours.db.db.selectFrom('post').select('text').orderBy('text').execute()
    expect(posts.map((p) => p.text)).toEqual(['compressed', 'first', 'last'])
  })
})

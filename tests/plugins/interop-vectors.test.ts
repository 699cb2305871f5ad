// The protocol's syntax vectors (bluesky-social/atproto-interop-tests, tests/fixtures/interop)
// at the record edge: every line of each file, valid and invalid, is written in a record field of
// that format (with `validate: false`, so the PDS takes it), and both indexers must keep or skip
// each record alike — an invalid value makes the record invalid exactly where the stock's checks
// do, never a crash and never a half-written record. Record keys and TIDs go in the record's key,
// where the PDS refuses the keys that are not record keys (those are left to the frame edge).
// NSIDs and at-identifiers name no field of a record the plugins index: they belong to the rpc
// edge.
import { registry } from '@openplane/telemetry'
import { describe, expect, it } from 'vitest'
import { syntaxVectors } from '../harness/interop.ts'
import { compareIndexers } from '../harness/compare-indexers.ts'
import { createUser } from '../harness/seed.ts'
import type { StockNetwork } from '../harness/stock-network.ts'

type Rec = Record<string, unknown>

async function opsCounted(outcome: string): Promise<number> {
  const m = await registry.getSingleMetric('openplane_indexer_ops_total')?.get()
  return (m?.values ?? [])
    .filter((v) => v.labels.outcome === outcome)
    .reduce((a, v) => a + v.value, 0)
}

const CID = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
const CREATED = '2026-11-29T12:00:00.000Z'

const both = (format: string, extra: string[] = []) => [
  ...syntaxVectors(`${format}_syntax_valid`),
  ...syntaxVectors(`${format}_syntax_invalid`),
  ...extra.flatMap((f) => syntaxVectors(f)),
]

interface Written {
  format: string
  value: string
  uri: string
}

async function scenario(net: StockNetwork): Promise<{ written: Written[]; refused: number }> {
  const { sc } = net
  const [alice, bob] = [await createUser(sc, 'alice'), await createUser(sc, 'bob')]
  const written: Written[] = []
  let refused = 0
  const write = async (
    format: string,
    value: string,
    collection: string,
    record: Rec,
    rkey?: string,
  ) => {
    try {
      const res = await sc.agent.com.atproto.repo.createRecord(
        {
          repo: alice,
          collection,
          rkey,
          validate: false,
          record: { $type: collection, ...record },
        },
        { headers: sc.getHeaders(alice as never), encoding: 'application/json' },
      )
      written.push({ format, value, uri: res.data.uri })
    } catch {
      refused++
    }
  }
  const target = `at://${bob}/app.bsky.feed.post/3kaaaaaaaaa22`
  for (const v of both('datetime', ['datetime_parse_invalid'])) {
    await write('datetime', v, 'app.bsky.feed.post', { text: 'at a time', createdAt: v })
  }
  for (const v of both('language', ['language_parse_invalid'])) {
    await write('language', v, 'app.bsky.feed.post', {
      text: 'in a language',
      createdAt: CREATED,
      langs: [v],
    })
  }
  for (const v of both('did')) {
    await write('did', v, 'app.bsky.graph.follow', { subject: v, createdAt: CREATED })
  }
  for (const v of both('handle')) {
    await write('handle', v, 'app.bsky.graph.verification', {
      subject: bob,
      handle: v,
      displayName: 'Bob',
      createdAt: CREATED,
    })
  }
  for (const v of both('aturi')) {
    await write('aturi', v, 'app.bsky.feed.like', {
      subject: { uri: v, cid: CID },
      createdAt: CREATED,
    })
  }
  for (const v of both('cid')) {
    await write('cid', v, 'app.bsky.feed.like', {
      subject: { uri: target, cid: v },
      createdAt: CREATED,
    })
  }
  for (const v of both('uri')) {
    await write('uri', v, 'app.bsky.feed.post', {
      text: 'a link',
      createdAt: CREATED,
      embed: {
        $type: 'app.bsky.embed.external',
        external: { uri: v, title: 't', description: 'd' },
      },
    })
  }
  for (const v of [...both('tid'), ...both('recordkey')]) {
    await write('rkey', v, 'app.bsky.feed.post', { text: 'under a key', createdAt: CREATED }, v)
  }
  return { written, refused }
}

describe('plugins: the interop syntax vectors in records', () => {
  const run = compareIndexers(scenario)

  it('wrote a record for every vector the PDS takes', () => {
    const { written, refused } = run().result
    const lines = [
      ...both('datetime', ['datetime_parse_invalid']),
      ...both('language', ['language_parse_invalid']),
      ...both('did'),
      ...both('handle'),
      ...both('aturi'),
      ...both('cid'),
      ...both('uri'),
      ...both('tid'),
      ...both('recordkey'),
    ]
    expect(written.length + refused).toBe(lines.length)
    // Only record keys the PDS refuses are missing.
    expect(written.filter((w) => w.format !== 'rkey').length).toBe(
      lines.length - both('tid').length - both('recordkey').length,
    )
  })

  it('kept valid values and skipped invalid ones, counted, never an error', async () => {
    const { ours, result } = run()
    const uris = result.written.map((w) => w.uri)
    const kept = new Set(
      (await ours.db.db.selectFrom('record').where('uri', 'in', uris).select('uri').execute()).map(
        (r) => r.uri,
      ),
    )
    // Both kinds occur for each format: the vectors do reach the checks (which records are
    // kept is the stock's to say: the per-table differential).
    for (const format of ['datetime', 'language', 'did', 'handle', 'aturi', 'cid', 'uri']) {
      const of = result.written.filter((w) => w.format === format)
      expect(
        of.some((w) => kept.has(w.uri)),
        `${format}: some kept`,
      ).toBe(true)
      expect(
        of.some((w) => !kept.has(w.uri)),
        `${format}: some skipped`,
      ).toBe(true)
    }
    // Every skipped one was counted as invalid; none failed otherwise.
    expect(await opsCounted('invalid')).toBe(uris.length - kept.size)
    expect(await opsCounted('error')).toBe(0)
  })
})

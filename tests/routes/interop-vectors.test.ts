// The protocol's syntax vectors (bluesky-social/atproto-interop-tests, tests/fixtures/interop) at
// the rpc edge, every line of the DID, handle and AT-URI files:
//   - inside a list of lookups, ours answers each exactly as the stock does (an answer equal to
//     the stock's, or a refusal where the stock refuses the batch);
//   - as the subject of a request, an invalid one is `invalid_argument` naming the field;
//   - a valid one that cannot be resolved (a DID method or a host nobody answers for) is
//     `not_found` or `unavailable`, never `internal`.
import { Code, ConnectError } from '@connectrpc/connect'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { syntaxVectors } from '../harness/interop.ts'
import { startOurServer, type OurServer } from '../harness/ours.ts'
import { seedBasic } from '../harness/seed.ts'
import {
  startStockNetwork,
  type DataplaneClient,
  type StockNetwork,
} from '../harness/stock-network.ts'

const all = (format: string) => [
  ...syntaxVectors(`${format}_syntax_valid`),
  ...syntaxVectors(`${format}_syntax_invalid`),
]
/** Validity as the vectors' own files say. */
const validIn = (format: string) => {
  const set = new Set(syntaxVectors(`${format}_syntax_valid`))
  return (v: string) => set.has(v)
}
const isDid = validIn('did')
const isHandle = validIn('handle')
const isAtUri = validIn('aturi')

type Outcome = { code: string; message?: string } | { answer: unknown }

async function outcome(call: () => Promise<{ toJson(): unknown }>): Promise<Outcome> {
  try {
    return { answer: (await call()).toJson() }
  } catch (err) {
    const e = ConnectError.from(err)
    return { code: Code[e.code], message: e.rawMessage }
  }
}

describe('rpcs: the interop syntax vectors', () => {
  let net: StockNetwork
  let ours: OurServer
  let mine: DataplaneClient
  let realDid: string
  let realPost: string

  beforeAll(async () => {
    net = await startStockNetwork()
    await seedBasic(net.sc)
    await net.network.processAll()
    ours = await startOurServer({
      schema: net.schema,
      plcUrl: net.network.plc.url,
      pdsUrl: net.network.pds.url,
    })
    mine = net.clientFor(ours.server.url)
    realDid = Object.values(net.sc.dids)[0]!
    realPost = Object.values(net.sc.posts)[0]![0]!.ref.uriStr
  })
  afterAll(async () => {
    await ours?.close()
    await net?.close()
  })

  /** The same call on both dataplanes; the vectors whose outcomes differ. */
  async function sameAsStock(
    values: string[],
    call: (client: DataplaneClient, v: string) => Promise<{ toJson(): unknown }>,
  ): Promise<{ value: string; ours: Outcome; stock: Outcome }[]> {
    const differ = []
    for (const value of values) {
      const [a, b] = await Promise.all([
        outcome(() => call(mine, value)),
        outcome(() => call(net.stock, value)),
      ])
      const same =
        'answer' in a && 'answer' in b
          ? JSON.stringify(a.answer) === JSON.stringify(b.answer)
          : 'code' in a && 'code' in b
      if (!same) differ.push({ value, ours: a, stock: b })
    }
    return differ
  }

  it('DIDs in lists of lookups are answered as the stock answers them', async () => {
    const dids = all('did')
    expect(await sameAsStock(dids, (c, v) => c.getActors({ dids: [v, realDid] }))).toEqual([])
    expect(
      await sameAsStock(dids, (c, v) => c.getRelationships({ actorDid: realDid, targetDids: [v] })),
    ).toEqual([])
    expect(
      await sameAsStock(dids, (c, v) =>
        c.getFollowsFollowing({ actorDid: realDid, targetDids: [v] }),
      ),
    ).toEqual([])
  })

  it('handles in lists of lookups are answered as the stock answers them', async () => {
    expect(
      await sameAsStock(all('handle'), (c, v) => c.getDidsByHandles({ handles: [v] })),
    ).toEqual([])
  })

  it('AT-URIs in lists of lookups are answered as the stock answers them', async () => {
    const uris = all('aturi')
    expect(
      await sameAsStock(uris, (c, v) =>
        c.getInteractionCounts({ refs: [{ uri: v }, { uri: realPost }] }),
      ),
    ).toEqual([])
    expect(await sameAsStock(uris, (c, v) => c.getPostRecords({ uris: [v, realPost] }))).toEqual([])
  })

  /** Ours alone, each vector as the subject: the outcomes that break the rule. */
  async function asSubject(
    values: string[],
    isValid: (v: string) => boolean,
    field: string,
    call: (v: string) => Promise<{ toJson(): unknown }>,
  ): Promise<{ value: string; got: Outcome }[]> {
    const wrong = []
    for (const value of values) {
      const got = await outcome(() => call(value))
      const ok = isValid(value)
        ? !('code' in got) || got.code === 'NotFound' || got.code === 'Unavailable'
        : 'code' in got && got.code === 'InvalidArgument' && !!got.message?.includes(field)
      if (!ok) wrong.push({ value, got })
    }
    return wrong
  }

  it('a DID as the subject: invalid_argument when invalid, never internal when valid', async () => {
    const dids = all('did')
    expect(await asSubject(dids, isDid, 'did', (v) => mine.getIdentityByDid({ did: v }))).toEqual(
      [],
    )
    expect(
      await asSubject(dids, isDid, 'actorDid', (v) => mine.getAuthorFeed({ actorDid: v })),
    ).toEqual([])
    expect(
      await asSubject(dids, isDid, 'actorDid', (v) => mine.getFollowers({ actorDid: v })),
    ).toEqual([])
  })

  it('a handle as the subject: invalid_argument when invalid, never internal when valid', async () => {
    expect(
      await asSubject(all('handle'), isHandle, 'handle', (v) =>
        mine.getIdentityByHandle({ handle: v }),
      ),
    ).toEqual([])
  })

  it('an AT-URI as the subject: invalid_argument when invalid, never internal when valid', async () => {
    expect(
      await asSubject(all('aturi'), isAtUri, 'postUri', (v) => mine.getThread({ postUri: v })),
    ).toEqual([])
  })
})

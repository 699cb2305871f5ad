// The fast CAR reader against the reference one, on repos built and signed with @atproto/repo:
// the same records, the same verdicts, and every CAR the fast reader is unsure of left to the
// reference (which decides as before).
import { Secp256k1Keypair } from '@atproto/crypto'
import { isCid, parseCid } from '@atproto/lex-data'
import {
  blocksToCarFile,
  MemoryBlockstore,
  Repo,
  WriteOpAction,
  type RecordCreateOp,
} from '@atproto/repo'
import { afterAll, describe, expect, it } from 'vitest'
import { readRepoFast } from './car-fast.ts'
import { CarReader } from './car-reader.ts'
import { readRepoCar, RepoCarError } from './car.ts'
import { decodeRepo } from './repo-decode.ts'

const DID = 'did:plc:decodetestaaaaaaaaaaaaaa'
const OTHER = 'did:plc:someoneelseaaaaaaaaaaaaa'
const now = '2026-11-29T12:00:00.000Z'
const blobCid = 'bafkreibme22gw2h7y2h7tg2fhqotaqjucnbc24deqo72b6mkl2egezxhvy'

function records() {
  const post = (text: unknown, extra: object = {}) => ({
    $type: 'app.bsky.feed.post',
    text,
    createdAt: now,
    ...extra,
  })
  const image = {
    $type: 'app.bsky.embed.images',
    images: [
      {
        alt: 'a cat',
        image: {
          $type: 'blob',
          ref: parseCid(blobCid),
          mimeType: 'image/jpeg',
          size: 1234,
        },
      },
    ],
  }
  return [
    ['app.bsky.feed.post', '3kaaaaaaaaa22', post('hello')],
    ['app.bsky.feed.post', '3kaaaaaaaaa23', post('with a picture', { embed: image })],
    // Invalid by the lexicon: text is not a string.
    ['app.bsky.feed.post', '3kaaaaaaaaa24', post(42)],
    [
      'app.bsky.feed.like',
      '3kaaaaaaaaa25',
      {
        $type: 'app.bsky.feed.like',
        subject: {
          uri: `at://${OTHER}/app.bsky.feed.post/3kaaaaaaaaa22`,
          cid: 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm',
        },
        createdAt: now,
      },
    ],
    // Invalid by the stock's rule: an item of somebody else's list.
    [
      'app.bsky.graph.listitem',
      '3kaaaaaaaaa26',
      {
        $type: 'app.bsky.graph.listitem',
        subject: OTHER,
        list: `at://${OTHER}/app.bsky.graph.list/3kaaaaaaaaa22`,
        createdAt: now,
      },
    ],
    // No plugin indexes it: left out.
    ['com.example.thing', '3kaaaaaaaaa27', { $type: 'com.example.thing', n: 1 }],
  ] as const
}

async function buildRepo(key: Secp256k1Keypair): Promise<Uint8Array> {
  const storage = new MemoryBlockstore()
  const writes = records().map(([collection, rkey, record]): RecordCreateOp => ({
    action: WriteOpAction.Create,
    collection,
    rkey,
    record: record as unknown as RecordCreateOp['record'],
  }))
  const repo = await Repo.create(storage, DID, key, writes)
  return blocksToCarFile(repo.cid, storage.blocks)
}

async function reference(bytes: Uint8Array, signingKey: string | undefined) {
  const car = await readRepoCar(
    (async function* () {
      yield bytes
    })(),
    { did: DID, signingKey, memoryBytes: 1 << 20 },
  )
  const out = []
  for await (const r of car.records(() => {})) out.push(r)
  await car.close()
  return { rev: car.rev, commit: car.commit, records: out }
}

const key = await Secp256k1Keypair.create()
const bytes = await buildRepo(key)

describe('readRepoFast', () => {
  it('reads what the reference reads', async () => {
    for (const signingKey of [undefined, key.did()]) {
      const fast = readRepoFast(bytes, { did: DID, signingKey })
      const ref = await reference(bytes, signingKey)
      expect(fast).toBeDefined()
      expect(fast!.rev).toBe(ref.rev)
      expect(fast!.commit).toBe(ref.commit)
      expect(fast!.records).toEqual(ref.records)
      expect(fast!.records).toHaveLength(records().length)
    }
  })

  it('leaves to the reference a CAR signed by another key, a corrupt block, another repo', async () => {
    const other = await Secp256k1Keypair.create()
    expect(readRepoFast(bytes, { did: DID, signingKey: other.did() })).toBeUndefined()
    // The record's text, changed in place: its block no longer hashes to its CID.
    const corrupt = bytes.slice()
    const at = Buffer.from(corrupt).indexOf('with a picture')
    corrupt[at] = 'W'.charCodeAt(0)
    expect(readRepoFast(corrupt, { did: DID, signingKey: key.did() })).toBeUndefined()
    expect(readRepoFast(bytes, { did: OTHER, signingKey: undefined })).toBeUndefined()
    const cut = bytes.subarray(0, bytes.length - 10)
    expect(readRepoFast(cut, { did: DID, signingKey: undefined })).toBeUndefined()
    // Each is then refused by the reference, with its reason.
    await expect(decodeRepo(bytes, req(other.did()))).rejects.toThrow(RepoCarError)
    await expect(decodeRepo(corrupt, req(key.did()))).rejects.toThrow(RepoCarError)
    await expect(decodeRepo(bytes, { ...req(undefined), did: OTHER })).rejects.toThrow(
      /commit is for/,
    )
  })
})

const req = (signingKey: string | undefined) => ({ did: DID, signingKey, memoryBytes: 1 << 20 })

describe('decodeRepo', () => {
  it('checks each record as the writer would, and drops collections no plugin indexes', async () => {
    const repo = await decodeRepo(bytes, req(key.did()))
    expect(repo.reader).toBe('fast')
    const byKey = new Map(repo.records.map((r) => [`${r.collection}/${r.rkey}`, r]))
    expect([...byKey.keys()]).not.toContain('com.example.thing/3kaaaaaaaaa27')
    expect(byKey.get('app.bsky.feed.post/3kaaaaaaaaa22')!.checked).toHaveProperty('json')
    const bad = byKey.get('app.bsky.feed.post/3kaaaaaaaaa24')!
    expect(bad.checked).toHaveProperty('invalid')
    expect(bad.record).toBeUndefined()
    expect(byKey.get('app.bsky.graph.listitem/3kaaaaaaaaa26')!.checked).toEqual({
      invalid: 'Creator of listitem does not match creator of list',
    })
  })
})

describe('CarReader', () => {
  const onWorker = new CarReader({ workers: 1, memoryBytes: 1 << 20 })
  const here = new CarReader({ workers: 0, memoryBytes: 1 << 20 })
  const streamed = new CarReader({ workers: 1, memoryBytes: 100 })
  afterAll(async () => {
    await Promise.all([onWorker.stop(), here.stop(), streamed.stop()])
  })
  const body = (b: Uint8Array) =>
    (async function* () {
      // In pieces, as a response body comes.
      for (let i = 0; i < b.length; i += 700) yield b.subarray(i, i + 700)
    })()
  const read = async (reader: CarReader) => {
    const car = await reader.read(body(bytes), { did: DID, signingKey: key.did() })
    const out = []
    for await (const r of car.records(() => {})) out.push(r)
    await car.close()
    return out
  }

  it('gives the same records on a worker, on this thread and streamed, CIDs as CIDs', async () => {
    const [a, b, c] = await Promise.all([read(onWorker), read(here), read(streamed)])
    // The streamed reader leaves the checks to the writer and every collection to the events.
    const keyed = (rs: typeof a) => rs.map((r) => `${r.collection}/${r.rkey} ${r.cid}`)
    expect(keyed(a)).toEqual(keyed(c.filter((r) => r.collection !== 'com.example.thing')))
    for (const r of a) {
      if (r.record !== undefined) expect(r.record).toEqual(c.find((x) => x.rkey === r.rkey)!.record)
    }
    expect(a).toEqual(b)
    type Picture = { embed: { images: { image: { ref: unknown } }[] } }
    const refIn = (rs: typeof a) =>
      (rs.find((r) => r.rkey === '3kaaaaaaaaa23')!.record as Picture).embed.images[0]!.image.ref
    const ref = refIn(a)
    expect(String(ref)).toBe(blobCid)
    expect(isCid(ref)).toBe(true)
    expect(Object.getPrototypeOf(ref)).toBe(Object.getPrototypeOf(refIn(b)))
  })

  it('refuses a CAR the reference refuses, from a worker', async () => {
    const other = await Secp256k1Keypair.create()
    await expect(onWorker.read(body(bytes), { did: DID, signingKey: other.did() })).rejects.toThrow(
      RepoCarError,
    )
  })

  it('starts its workers before any CAR when asked, and stops them while they load', async () => {
    const early = new CarReader({ workers: 1, memoryBytes: 1 << 20 })
    await early.started()
    expect(await read(early)).toEqual(await read(here))
    await early.stop()
    // Stopped before their imports have run: waited for, not torn down mid-load.
    const loading = new CarReader({ workers: 1, memoryBytes: 1 << 20 })
    const starting = loading.started()
    await loading.stop()
    await starting
    await expect(read(loading)).rejects.toThrow(/stopped/)
  })
})

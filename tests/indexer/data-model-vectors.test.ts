// The data-model vectors of the atproto interop tests (tests/fixtures/interop/data-model, CC0) at
// the edges where records come in. Frames: each fixture's DAG-CBOR block, with its published CID,
// as a commit's record is hashed to that CID and decoded to the fixture's value by both frame
// readers (the fast one and the reference). Jetstream: records are JSON made by another
// implementation; each valid value rides in a post that stays valid, and each invalid one makes
// its post an invalid record (counted and skipped, never a crash, never stored).
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { encode, cidForLex } from '@atproto/lex-cbor'
import { jsonToLex, type JsonValue } from '@atproto/lex-json'
import {
  checkRecords,
  decodeFrame,
  decodeFrameReference,
  type FrameResult,
} from '@openplane/ingest'
import { decodeCommitFrame } from '../../packages/ingest/src/commit-frame.ts'
import { describe, expect, it } from 'vitest'
import { decodeJetstream } from '../../packages/ingest/src/jetstream.ts'
import { car, frame } from '../harness/frames.ts'

const DIR = path.resolve(import.meta.dirname, '../fixtures/interop/data-model')
const read = <T>(name: string): T => JSON.parse(readFileSync(path.join(DIR, name), 'utf8')) as T

interface Fixture {
  json: JsonValue
  cbor_base64: string
  cid: string
}
interface Vector {
  note: string
  json: JsonValue
}

const FIXTURES = read<Fixture[]>('data-model-fixtures.json')
const VALID = read<Vector[]>('data-model-valid.json')
const INVALID = read<Vector[]>('data-model-invalid.json')

const DID = 'did:plc:datamodeldatamodeldatamo'
const createdAt = '2026-05-28T12:00:00.000Z'
type Lex = Parameters<typeof encode>[0]
/** Trusted reading: no signature, so no resolver is asked. */
const OPTS = { verify: false, idResolver: undefined as never }

/** A #commit frame whose one op creates a record with exactly these bytes under this CID. */
async function frameWith(bytes: Uint8Array, cid: string): Promise<Uint8Array> {
  const record = { cid: jsonToLex({ $link: cid }) as { bytes: Uint8Array }, bytes }
  const commitObj = { did: DID, version: 3, rev: '3kaaaaaaaaa22', prev: null, data: record.cid }
  const commitCid = await cidForLex(commitObj as Lex)
  return frame({ op: 1, t: '#commit' }, {
    seq: 1,
    rebase: false,
    tooBig: false,
    repo: DID,
    commit: commitCid,
    rev: '3kaaaaaaaaa22',
    since: null,
    blocks: car(commitCid, [record, { cid: commitCid, bytes: encode(commitObj as Lex) }]),
    ops: [{ action: 'create', path: 'com.example.fixture/3kaaaaaaaaa22', cid: record.cid }],
    blobs: [],
    time: createdAt,
  } as unknown as Lex)
}

function recordOf(res: FrameResult): unknown {
  if (res.kind !== 'event' || res.event.type !== 'commit')
    throw new Error(`not a commit: ${res.kind}`)
  return res.event.ops[0]!.record
}

describe('data-model fixtures in frames', () => {
  for (const [i, f] of FIXTURES.entries()) {
    it(`fixture ${i}: the block hashes to its CID and decodes to its value on both paths`, async () => {
      const bytes = new Uint8Array(Buffer.from(f.cbor_base64, 'base64'))
      const value = jsonToLex(f.json, { strict: true })
      expect((await cidForLex(value as Lex)).toString()).toBe(f.cid)
      expect(Buffer.from(encode(value as Lex)).equals(Buffer.from(bytes))).toBe(true)
      const wire = await frameWith(bytes, f.cid)
      const fast = decodeCommitFrame(wire)
      expect(fast, 'read by the fast path').toBeDefined()
      expect(fast!.event.ops[0]!.record).toEqual(value)
      expect(recordOf(await decodeFrameReference(wire, OPTS))).toEqual(value)
      expect(recordOf(await decodeFrame(wire, OPTS))).toEqual(value)
    })
  }

  it('a block that does not hash to its CID is a malformed frame on both paths', async () => {
    const f = FIXTURES[0]!
    const bytes = new Uint8Array(Buffer.from(f.cbor_base64, 'base64'))
    bytes[bytes.length - 1] = bytes[bytes.length - 1]! ^ 1
    const wire = await frameWith(bytes, f.cid)
    expect(decodeCommitFrame(wire)).toBeUndefined()
    for (const res of [await decodeFrame(wire, OPTS), await decodeFrameReference(wire, OPTS)]) {
      expect(res.kind).toBe('malformed')
    }
  })
})

/** A Jetstream create of a post carrying the vector's value beside its own fields. */
function jetstreamPost(json: JsonValue): Uint8Array {
  const record =
    json && typeof json === 'object' && !Array.isArray(json)
      ? { $type: 'app.bsky.feed.post', text: 'carrier', createdAt, ...json }
      : json
  const msg = {
    did: DID,
    time_us: 1_780_000_000_000_000,
    kind: 'commit',
    commit: {
      rev: '3kaaaaaaaaa22',
      operation: 'create',
      collection: 'app.bsky.feed.post',
      rkey: '3kaaaaaaaaa22',
      record,
      cid: 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm',
    },
  }
  return new TextEncoder().encode(JSON.stringify(msg))
}

/** What the indexer makes of the message: the op's verdict, or why the message was skipped. */
function verdict(bytes: Uint8Array): { valid: true } | { invalid: string } | { malformed: string } {
  const res = decodeJetstream(bytes)
  if (res.kind === 'malformed') return { malformed: res.reason }
  if (res.kind !== 'event' || res.event.type !== 'commit') throw new Error(`unexpected ${res.kind}`)
  checkRecords(res.event)
  const checked = res.event.ops[0]!.checked
  if (!checked) throw new Error('not checked')
  return 'invalid' in checked ? { invalid: checked.invalid } : { valid: true }
}

describe('data-model JSON at the Jetstream edge', () => {
  for (const v of VALID) {
    it(`valid: ${v.note}`, () => {
      expect(verdict(jetstreamPost(v.json))).toEqual({ valid: true })
    })
  }
  for (const v of INVALID) {
    it(`invalid: ${v.note}`, () => {
      const got = verdict(jetstreamPost(v.json))
      expect(got).not.toHaveProperty('valid')
      if ('invalid' in got) expect(got.invalid).toMatch(/^record is not valid data-model JSON/)
    })
  }

  it('a record invalid by the data model keeps no value to store', () => {
    const res = decodeJetstream(jetstreamPost(INVALID.find((v) => v.note === 'float')!.json))
    if (res.kind !== 'event' || res.event.type !== 'commit') throw new Error('not a commit')
    checkRecords(res.event)
    expect(res.event.ops[0]!.record).toBeUndefined()
    expect(res.event.ops[0]!.checked).toHaveProperty('invalid')
  })
})

// The fast commit decoder (commit-frame.ts) against the reference decoder (@atproto's CBOR, CAR
// and sync parsing): over a recorded network corpus, the malformed-frame fixtures and thousands
// of corrupted commit frames, both give the same result for every frame, and the fast path reads
// every ordinary commit itself.
import { readFileSync } from 'node:fs'
import path from 'node:path'
import type { IdResolver } from '@atproto/identity'
import { decodeCommitFrame } from '../../packages/ingest/src/commit-frame.ts'
import { decodeFrame, decodeFrameReference } from '@openplane/ingest'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { recordTestCorpus, type TestCorpus } from '../harness/corpus.ts'
import { parseCorpus } from '../harness/fake-relay.ts'

const opts = { verify: false, idResolver: undefined as unknown as IdResolver }

/** A deterministic stream of numbers in [0, 1). */
function rng(seed: number): () => number {
  let s = seed >>> 0
  return () => {
    s = (s + 0x6d2b79f5) >>> 0
    let t = s
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

describe('fast commit decoding', () => {
  let recorded: TestCorpus
  const frames: Uint8Array[] = []

  beforeAll(async () => {
    recorded = await recordTestCorpus({ name: 'commit-frame', repos: 200, events: 3000, seed: 7 })
    for await (const m of recorded.corpus.messages()) frames.push(m.bytes)
  }, 120_000)
  afterAll(async () => {
    await recorded?.close()
  })

  it('reads every commit of the corpus itself, as the reference does', async () => {
    let commits = 0
    for (const bytes of frames) {
      const reference = await decodeFrameReference(bytes, opts)
      expect(await decodeFrame(bytes, opts)).toEqual(reference)
      if (reference.kind === 'event' && reference.event.type === 'commit') {
        commits++
        expect(decodeCommitFrame(bytes)).toBeDefined()
      }
    }
    expect(commits).toBeGreaterThan(2000)
  })

  it('answers the malformed-frame fixtures as the reference does', async () => {
    const fixtures = parseCorpus(
      readFileSync(
        path.resolve(import.meta.dirname, '../fixtures/firehose/malformed.jsonl'),
        'utf8',
      ),
    )
    for (const f of fixtures) {
      expect(await decodeFrame(f.bytes, opts)).toEqual(await decodeFrameReference(f.bytes, opts))
    }
  })

  it('answers corrupted commit frames as the reference does', async () => {
    const random = rng(11)
    const commits = frames.filter((b) => decodeCommitFrame(b) !== undefined).slice(0, 400)
    let fast = 0
    for (const original of commits) {
      for (let round = 0; round < 10; round++) {
        const bytes = original.slice()
        const kind = round % 3
        if (kind === 0) {
          // One byte changed anywhere: a CBOR type, a length, a key, a CID, a block's bytes.
          bytes[Math.floor(random() * bytes.length)] = Math.floor(random() * 256)
        } else if (kind === 1) {
          bytes[Math.floor(random() * bytes.length)]! ^= 1 << Math.floor(random() * 8)
        }
        const cut = kind === 2 ? bytes.subarray(0, Math.floor(random() * bytes.length)) : bytes
        const reference = await decodeFrameReference(cut, opts)
        expect(await decodeFrame(cut, opts)).toEqual(reference)
        if (decodeCommitFrame(cut)) fast++
      }
    }
    // Some corruptions leave a readable commit (a changed byte inside a record's text, say):
    // those the fast path read, and read as the reference did.
    expect(fast).toBeGreaterThan(0)
  })
})

// The fast commit decoder (commit-frame.ts) against the reference decoder (@atproto's CBOR, CAR
// and sync parsing): over a recorded network corpus, the malformed-frame fixtures and thousands
// of corrupted commit frames, both give the same result for every frame, trusting the relay and
// verifying, and the fast path reads every ordinary commit itself. Verifying, it also checks the
// sync 1.1 commit proofs, which the reference does not: a frame whose prevData was changed is
// refused.
import { readFileSync } from 'node:fs'
import path from 'node:path'
import type { IdResolver } from '@atproto/identity'
import { decode as decodeCbor, decodeFirst, encode as encodeCbor } from '@atcute/cbor'
import { Secp256k1Keypair } from '@atproto/crypto'
import { decodeCommitFrame, verifyCommitFrame } from '../../packages/ingest/src/commit-frame.ts'
import { createIdentity } from '@openplane/identity'
import { decodeFrame, decodeFrameReference, type FrameResult } from '@openplane/ingest'
import { ReplayServer, Rng } from '@openplane/sim'
import { registry } from '@openplane/telemetry'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { recordTestCorpus, type TestCorpus } from '../harness/corpus.ts'
import { parseCorpus } from '../harness/fake-relay.ts'

const opts = { verify: false, idResolver: undefined as unknown as IdResolver }

async function proofs(outcome: string): Promise<number> {
  const m = await registry.getSingleMetric('openplane_commit_proofs_total')?.get()
  return (m?.values ?? [])
    .filter((v) => v.labels.outcome === outcome)
    .reduce((a, v) => a + v.value, 0)
}

/** A commit frame with its prevData replaced (the commit and its signature unchanged). */
function withPrevData(bytes: Uint8Array, other: unknown): Uint8Array {
  const [header, rest] = decodeFirst(bytes) as [unknown, Uint8Array]
  const body = decodeCbor(rest) as Record<string, unknown>
  body.prevData = other
  return new Uint8Array(Buffer.concat([encodeCbor(header), encodeCbor(body)]))
}

describe('fast commit decoding', () => {
  let recorded: TestCorpus
  let server: ReplayServer
  let verifying: { verify: boolean; idResolver: IdResolver }
  const frames: Uint8Array[] = []

  beforeAll(async () => {
    recorded = await recordTestCorpus({ name: 'commit-frame', repos: 200, events: 3000, seed: 7 })
    for await (const m of recorded.corpus.messages()) frames.push(m.bytes)
    // The corpus's users' DID documents (their signing keys) come from the replay server.
    server = await ReplayServer.start({ corpus: recorded.corpus })
    const { idResolver } = createIdentity({ plcUrl: server.httpUrl, allowPrivateNetwork: true })
    verifying = { verify: true, idResolver }
  }, 120_000)
  afterAll(async () => {
    await server?.close()
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
    const rng = new Rng(11)
    const random = () => rng.float()
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

  it('verifies every commit of the corpus itself, as the reference does, proofs included', async () => {
    const before = {
      held: await proofs('held'),
      absent: await proofs('absent'),
      refused: await proofs('refused'),
    }
    let commits = 0
    for (const bytes of frames) {
      const reference = await decodeFrameReference(bytes, verifying)
      const ours = await decodeFrame(bytes, verifying)
      expect(ours).toEqual(reference)
      if (reference.kind === 'event' && reference.event.type === 'commit') commits++
    }
    // Every commit took the fast path: its proof was undone, or it had none (a repo's first
    // commit has no tree before it).
    const held = (await proofs('held')) - before.held
    const absent = (await proofs('absent')) - before.absent
    expect(held + absent).toBe(commits)
    expect(held).toBeGreaterThan(commits * 0.9)
    expect((await proofs('refused')) - before.refused).toBe(0)
  })

  it('answers corrupted commit frames as the reference does, verifying', async () => {
    const rng = new Rng(13)
    const random = () => rng.float()
    const commits = frames.filter((b) => decodeCommitFrame(b) !== undefined).slice(0, 150)
    for (const original of commits) {
      for (let round = 0; round < 6; round++) {
        const bytes = original.slice()
        bytes[Math.floor(random() * bytes.length)]! ^= 1 << Math.floor(random() * 8)
        const reference = await decodeFrameReference(bytes, verifying)
        const ours = await decodeFrame(bytes, verifying)
        // A changed byte inside the frame's prevData makes a proof that does not undo: refused
        // here, which the reference does not check. Everything else agrees.
        if (isRefusedProof(ours)) expect(reference.kind).toBe('event')
        else expect(ours).toEqual(reference)
      }
    }
  })

  it('refuses a commit whose prevData its ops do not undo to', async () => {
    const commits = frames.filter((b) => decodeCommitFrame(b) !== undefined).slice(0, 20)
    const before = await proofs('refused')
    for (const original of commits) {
      const body = decodeCbor(decodeFirst(original)[1]) as Record<string, unknown>
      // The commit's own CID as the root before: a well-formed CID the tree does not undo to.
      const forged = withPrevData(original, body.commit)
      const reference = await decodeFrameReference(forged, verifying)
      expect(reference.kind).toBe('event')
      const ours = await decodeFrame(forged, verifying)
      expect(isRefusedProof(ours)).toBe(true)
    }
    expect((await proofs('refused')) - before).toBe(commits.length)
  })

  it('reads a commit as verified only with the key that signed it', async () => {
    const stranger = (await Secp256k1Keypair.create()).did()
    const commits = frames.filter((b) => decodeCommitFrame(b) !== undefined).slice(0, 50)
    for (const bytes of commits) {
      const keyOf = (did: string, refresh: boolean) =>
        verifying.idResolver.did.resolveAtprotoKey(did, refresh)
      expect(await verifyCommitFrame(bytes, keyOf)).toMatchObject({ event: { type: 'commit' } })
      // Another key, cached or fresh: not verified here (the reference then refuses it).
      expect(await verifyCommitFrame(bytes, async () => stranger)).toBeUndefined()
    }
  })
})

function isRefusedProof(r: FrameResult): boolean {
  return r.kind === 'malformed' && r.reason === 'commit proof does not undo to its prevData'
}

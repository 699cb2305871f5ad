// Frames decoded on worker threads come back exactly as decoded on the writer's thread: the same
// events in arrival order, records with real CIDs again (not their cloned fields), the same check
// verdicts and JSON, and malformed frames reported the same way.
import type { Worker } from 'node:worker_threads'
import { IdResolver } from '@atproto/identity'
import { lexStringify } from '@atproto/lex-json'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createDecoder, type FrameDecoder } from '../../packages/ingest/src/decoder.ts'
import type { FrameResult } from '../../packages/ingest/src/frames.ts'
import { recordTestCorpus } from '../harness/corpus.ts'

type LexValue = Parameters<typeof lexStringify>[0]

/** A result as comparable text: records through lexStringify, which knows CIDs by their class. */
function comparable(res: FrameResult): string {
  if (res.kind !== 'event' || res.event.type !== 'commit') return JSON.stringify(res)
  const ops = res.event.ops.map((op) => ({
    ...op,
    record: op.record === undefined ? undefined : lexStringify(op.record as LexValue),
  }))
  return JSON.stringify({ ...res, event: { ...res.event, ops } })
}

describe('frame decoding on worker threads', () => {
  const frames: Uint8Array[] = []
  const decoders: FrameDecoder[] = []

  beforeAll(async () => {
    const recorded = await recordTestCorpus({ name: 'decoder', repos: 60, events: 400, seed: 5 })
    for await (const m of recorded.corpus.messages()) frames.push(m.bytes)
    await recorded.close()
    // Bad input travels the same way: bytes that are no frame, and a frame cut short.
    frames.splice(100, 0, new Uint8Array([1, 2, 3, 250, 9]), frames[50]!.subarray(0, 40))
  })
  afterAll(async () => {
    await Promise.all(decoders.map((d) => d.stop()))
  })

  it('gives what the writer thread gives, frame for frame and in order', async () => {
    const idResolver = new IdResolver({})
    const here = createDecoder({ verify: false, idResolver, workers: 0 })
    const workers = createDecoder({ verify: false, idResolver, workers: 2 })
    decoders.push(here, workers)
    const expected = await Promise.all(frames.map((f) => here.decode(f)))
    const got = await Promise.all(frames.map((f) => workers.decode(f)))
    expect(got.map(comparable)).toEqual(expected.map(comparable))
    const kinds = new Set(expected.map((r) => r.kind))
    expect(kinds).toEqual(new Set(['event', 'malformed']))
    // Records did come through, checked, with links and blobs among them.
    const ops = got.flatMap((r) =>
      r.kind === 'event' && r.event.type === 'commit' ? r.event.ops : [],
    )
    expect(ops.filter((op) => op.checked && 'json' in op.checked).length).toBeGreaterThan(200)
    expect(
      ops.some((op) => op.checked && 'json' in op.checked && op.checked.json.includes('$link')),
    ).toBe(true)
  })
  it('starts its workers before the first frame when asked', async () => {
    const idResolver = new IdResolver({})
    const here = createDecoder({ verify: false, idResolver, workers: 0 })
    const early = createDecoder({ verify: false, idResolver, workers: 1 })
    decoders.push(here, early)
    await Promise.all([here.started(), early.started()])
    const some = frames.slice(0, 50)
    const expected = await Promise.all(some.map((f) => here.decode(f)))
    const got = await Promise.all(some.map((f) => early.decode(f)))
    expect(got.map(comparable)).toEqual(expected.map(comparable))
  })

  it('loses no frame when workers die: they are replaced, then given up for this thread', async () => {
    const idResolver = new IdResolver({})
    const here = createDecoder({ verify: false, idResolver, workers: 0 })
    decoders.push(here)
    const expected = (await Promise.all(frames.map((f) => here.decode(f)))).map(comparable)
    const started: Worker[] = []
    const track = (w: Worker) => started.push(w)
    process.on('worker', track)
    try {
      const workers = createDecoder({ verify: false, idResolver, workers: 1 })
      decoders.push(workers)
      // A worker killed with frames in flight (64 a message, sent before it can answer): its
      // replacement decodes them again.
      while (!started.length) await new Promise((r) => setTimeout(r, 5))
      const first = Promise.all(frames.map((f) => workers.decode(f)))
      void started[0]!.terminate()
      expect((await first).map(comparable)).toEqual(expected)
      expect(started.length).toBe(2)
      // Workers that keep dying are given up: decoding goes on, on this thread.
      const second = Promise.all(frames.map((f) => workers.decode(f)))
      for (let i = 1; i <= 6; i++) {
        await new Promise((r) => setTimeout(r, 5))
        await started[i]?.terminate()
      }
      expect((await second).map(comparable)).toEqual(expected)
      const third = await Promise.all(frames.slice(0, 50).map((f) => workers.decode(f)))
      expect(third.map(comparable)).toEqual(expected.slice(0, 50))
      expect(started.length).toBeLessThanOrEqual(7)
    } finally {
      process.off('worker', track)
    }
  })
})

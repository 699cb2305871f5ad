// Frames → checked events, on worker threads so that the writer's thread only plans and writes:
// frame and CAR decoding, block hashing, signature checks (verify mode) and the record checks run
// beside it. Results come back in the order frames arrived (each caller awaits its own promise;
// the indexer chains them). A worker that dies is replaced and its frames are decoded again; a
// batch of frames that kills workers twice is decoded on this thread instead, and workers that
// keep dying are given up for this thread, so no frame is ever lost to a worker.
import { Worker } from 'node:worker_threads'
import type { IdResolver } from '@atproto/identity'
import { decodeCid } from '@atproto/lex-data'
import type { IdentityOptions } from '@openplane/identity'
import { childLogger, counter } from '@openplane/telemetry'
import { answerKeys, keyOfLookup, type KeyLookup, type KeyRequests } from './asked-keys.ts'
import { checkRecords } from './checks.ts'
import { decodeFrame, type FrameOptions, type FrameResult } from './frames.ts'
import { decodeCpuSeconds, stageSeconds, threadCpuSeconds } from './stages.ts'
import { WorkerExits } from './worker-exits.ts'
import { READY, terminateWhenReady, whenLoaded, whenReady } from './worker-ready.ts'

const log = childLogger('decoder')
const restarts = counter(
  'openplane_decode_worker_restarts_total',
  'Decode workers that died and were replaced',
)

export interface FrameDecoder {
  decode(bytes: Uint8Array): Promise<FrameResult>
  /**
   * decode() with a callback, called once: for a caller taking thousands of frames a second,
   * which then makes no promise per frame.
   */
  decodeInto(bytes: Uint8Array, done: (res: FrameResult) => void): void
  /** Resolves once its threads' imports have run (at once without threads). */
  started(): Promise<void>
  stop(): Promise<void>
}

export interface DecoderOptions {
  /** Verify commit signatures and MST proofs. */
  verify: boolean
  /** This thread's resolver (used when frames are decoded here). */
  idResolver: IdResolver
  /** Worker threads (0: decode on this thread). */
  workers: number
  /** How a worker builds its own resolver; required to verify on workers. */
  identity?: IdentityOptions
  /**
   * Where workers get signing keys when verifying (the writer's lookup thread, whose cache its
   * handle checks share); without it each worker resolves documents itself.
   */
  keys?: KeyLookup
}

/** Decodes a frame and checks its records: what a worker does for each frame. */
export async function decodeChecked(bytes: Uint8Array, opts: FrameOptions): Promise<FrameResult> {
  const res = await decodeFrame(bytes, opts)
  if (res.kind === 'event' && res.event.type === 'commit') checkRecords(res.event)
  return res
}

export function createDecoder(opts: DecoderOptions): FrameDecoder {
  const { keys } = opts
  const frameOpts: FrameOptions = {
    verify: opts.verify,
    idResolver: opts.idResolver,
    keyOf: keys && keyOfLookup(keys),
  }
  if (opts.workers <= 0) {
    const decode = async (bytes: Uint8Array) => {
      const started = performance.now()
      const cpuBefore = threadCpuSeconds()
      const res = await decodeChecked(bytes, frameOpts)
      stageSeconds.inc({ stage: 'decode' }, (performance.now() - started) / 1000)
      decodeCpuSeconds.inc(threadCpuSeconds() - cpuBefore)
      return res
    }
    return {
      decode,
      decodeInto: (bytes, done) => void decode(bytes).then(done, (err) => done(failedFrame(err))),
      started: async () => {},
      stop: async () => {},
    }
  }
  if (opts.verify && !opts.identity) {
    throw new Error('verifying on decode workers needs the identity options to resolve keys')
  }
  return new WorkerDecoder(
    opts.workers,
    { verify: opts.verify, identity: opts.identity, askKeys: opts.verify && !!opts.keys },
    frameOpts,
    opts.keys,
  )
}

/** What a worker is started with. */
export interface WorkerSetup {
  verify: boolean
  identity?: IdentityOptions
  /** Signing keys are asked of the starting thread (asked-keys.ts). */
  askKeys?: boolean
}

/** Frames sent as one message: packed into one buffer (the ws buffers may share a slab). */
export interface WorkerRequest {
  id: number
  bytes: Uint8Array
  ends: number[]
}
export interface WorkerReply {
  id: number
  results: FrameResult[]
  /**
   * The worker's time and its thread's CPU time since its previous reply (messages it decodes
   * at once count once).
   */
  seconds: number
  cpuSeconds: number
}

interface Waiting {
  resolve: (r: FrameResult) => void
  bytes: Uint8Array
}
interface Sent {
  request: WorkerRequest
  waiting: Waiting[]
  tries: number
}
interface Slot {
  worker: Worker
  /** Its imports have run: it may be terminated (worker-ready.ts). */
  ready: Promise<void>
  sent: Map<number, Sent>
  frames: number
}

/** Frames gathered into one message: enough to pay for the hop, few enough to keep order flowing. */
const PER_MESSAGE = 64

class WorkerDecoder implements FrameDecoder {
  private readonly slots: Slot[] = []
  private readonly setup: WorkerSetup
  private readonly frameOpts: FrameOptions
  private readonly keys: KeyLookup | undefined
  private queue: Waiting[] = []
  private scheduled = false
  private nextId = 0
  private stopped = false
  /** Too many exits lately and decoding stays on this thread. */
  private readonly exits = new WorkerExits()
  private here = false

  constructor(
    workers: number,
    setup: WorkerSetup,
    frameOpts: FrameOptions,
    keys: KeyLookup | undefined,
  ) {
    this.setup = setup
    this.frameOpts = frameOpts
    this.keys = keys
    for (let i = 0; i < workers; i++) this.slots.push(this.spawn())
  }

  decode(bytes: Uint8Array): Promise<FrameResult> {
    return new Promise((resolve) => this.decodeInto(bytes, resolve))
  }

  decodeInto(bytes: Uint8Array, done: (res: FrameResult) => void): void {
    if (this.here) {
      void decodeChecked(bytes, this.frameOpts).then(done, (err) => done(failedFrame(err)))
      return
    }
    this.queue.push({ resolve: done, bytes })
    if (this.queue.length >= PER_MESSAGE) this.send()
    else if (!this.scheduled) {
      this.scheduled = true
      setImmediate(() => this.send())
    }
  }

  started(): Promise<void> {
    return whenLoaded([...this.slots])
  }

  async stop(): Promise<void> {
    this.stopped = true
    await Promise.all(this.slots.map((s) => terminateWhenReady(s.worker, s.ready)))
  }

  private send(): void {
    this.scheduled = false
    if (!this.queue.length) return
    const waiting = this.queue
    this.queue = []
    let size = 0
    for (const w of waiting) size += w.bytes.length
    const bytes = new Uint8Array(size)
    const ends: number[] = []
    let at = 0
    for (const w of waiting) {
      bytes.set(w.bytes, at)
      ends.push((at += w.bytes.length))
    }
    const sent: Sent = { request: { id: this.nextId++, bytes, ends }, waiting, tries: 0 }
    if (this.here || !this.slots.length) return void this.decodeHere(sent)
    const slot = this.slots.reduce((a, b) => (b.frames < a.frames ? b : a))
    this.post(slot, sent)
  }

  private post(slot: Slot, sent: Sent): void {
    slot.sent.set(sent.request.id, sent)
    slot.frames += sent.waiting.length
    slot.worker.postMessage(sent.request)
  }

  private spawn(): Slot {
    const worker = new Worker(new URL('./decode-worker.ts', import.meta.url), {
      workerData: this.setup,
    })
    const slot: Slot = { worker, ready: whenReady(worker), sent: new Map(), frames: 0 }
    worker.on('message', (reply: WorkerReply | KeyRequests | typeof READY) => {
      if (reply === READY) return
      if ('keys' in reply) return void this.answerKeys(worker, reply)
      const sent = slot.sent.get(reply.id)
      if (!sent) return
      slot.sent.delete(reply.id)
      slot.frames -= sent.waiting.length
      stageSeconds.inc({ stage: 'decode' }, reply.seconds)
      decodeCpuSeconds.inc(reply.cpuSeconds)
      reply.results.forEach((r, i) => sent.waiting[i]!.resolve(revive(r)))
    })
    worker.on('error', (err) => log.error({ err }, 'decode worker failed'))
    worker.on('exit', (code) => {
      if (this.stopped) return
      restarts.inc()
      this.slots.splice(this.slots.indexOf(slot), 1)
      // Decoding falls back to this thread, slower but complete.
      if (this.exits.tooMany()) {
        log.error({ code }, 'decode workers keep exiting; decoding on the writer thread')
        this.here = true
        for (const sent of slot.sent.values()) void this.decodeHere(sent)
        return
      }
      log.error({ code, inFlight: slot.frames }, 'decode worker exited; replacing it')
      const replacement = this.spawn()
      this.slots.push(replacement)
      for (const sent of slot.sent.values()) {
        if (++sent.tries >= 2) void this.decodeHere(sent)
        else this.post(replacement, sent)
      }
    })
    // Idle workers must not keep the process alive.
    worker.unref()
    return slot
  }

  private async answerKeys(worker: Worker, asked: KeyRequests): Promise<void> {
    const replies = await answerKeys(
      this.keys ?? (() => Promise.reject(new Error('no key lookups'))),
      asked,
    )
    // A worker that exited meanwhile asked for frames that are decoded again elsewhere.
    if (this.slots.some((s) => s.worker === worker)) worker.postMessage(replies)
  }

  private async decodeHere(sent: Sent): Promise<void> {
    for (const w of sent.waiting) {
      w.resolve(await decodeChecked(w.bytes, this.frameOpts).catch(failedFrame))
    }
  }
}

/**
 * A frame whose decoding threw (a bug: decoding reports bad input as `malformed` itself): skipped
 * as malformed, so that the frames after it are still taken.
 */
export function failedFrame(err: unknown): FrameResult {
  return {
    kind: 'malformed',
    reason: `decoding failed: ${err instanceof Error ? err.message : String(err)}`,
  }
}

/**
 * Records come back from a worker as plain data: a CID (a class) arrives as a plain object with
 * its fields. Turns those back into CIDs, in place.
 */
function revive(res: FrameResult): FrameResult {
  if (res.kind === 'event' && res.event.type === 'commit') {
    for (const op of res.event.ops) if (op.record !== undefined) op.record = reviveCids(op.record)
  }
  return res
}

/** A value cloned from another thread with its CIDs made CIDs again, in place. */
export function reviveCids(value: unknown): unknown {
  if (!value || typeof value !== 'object' || ArrayBuffer.isView(value)) return value
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) value[i] = reviveCids(value[i])
    return value
  }
  const obj = value as Record<string, unknown>
  // A cloned CID keeps `'/'` and `bytes` as one array (the clone preserves shared references).
  const bytes = obj['/']
  if (bytes instanceof Uint8Array && bytes === obj.bytes) return decodeCid(bytes)
  for (const k of Object.keys(obj)) obj[k] = reviveCids(obj[k])
  return value
}

// Starts a load generator (load-worker.ts) in a worker thread of the bench process and runs its
// loads: every reader once, a sequential run, open-loop steps. Each driver gets its own worker,
// kept for the whole side, so its client and code are warm when a step starts.
import { Worker } from 'node:worker_threads'
import { GetTimelineRequest } from '@openplane/proto'
import type { StepResult } from './open-loop.ts'
import type { Driver, Reply, Request, WorkerInput } from './load-worker.ts'

export type { Driver } from './load-worker.ts'
export type { StepResult } from './open-loop.ts'

/** A GetTimeline request for `reader` as one uncompressed gRPC message frame. */
export function timelineRequestFrame(reader: string, limit = 50): Buffer {
  const message = new GetTimelineRequest({ actorDid: reader, limit, cursor: '' }).toBinary()
  const frame = Buffer.allocUnsafe(5 + message.length)
  frame[0] = 0
  frame.writeUInt32BE(message.length, 1)
  frame.set(message, 5)
  return frame
}

export interface LoadGenerator {
  /** Every reader's request once, a few at a time (warming). */
  all(): Promise<void>
  /** p50 (ms) of `n` requests sent one at a time. */
  sequential(n: number): Promise<number>
  /** `rate` req/s offered for `seconds`, open loop. */
  step(rate: number, seconds: number): Promise<StepResult>
  close(): Promise<void>
}

/** A request before it is numbered. */
type WithoutId<R> = R extends unknown ? Omit<R, 'id'> : never
type Unsent = WithoutId<Request>

// About a 4 MB semi-space: small young generations pause under 1 ms (see bench/timeline.ts).
const YOUNG_GENERATION_MB = 12

export function startGenerator(driver: Driver, readers: string[]): LoadGenerator {
  const worker = new Worker(new URL('./load-worker.ts', import.meta.url), {
    workerData: { driver, readers } satisfies WorkerInput,
    resourceLimits: { maxYoungGenerationSizeMb: YOUNG_GENERATION_MB },
  })
  const pending = new Map<number, { resolve(v: unknown): void; reject(e: Error): void }>()
  let failure: Error | undefined
  const failAll = (err: Error) => {
    failure = err
    for (const p of pending.values()) p.reject(err)
    pending.clear()
  }
  worker.on('message', (reply: Reply) => {
    const p = pending.get(reply.id)
    pending.delete(reply.id)
    if ('error' in reply) p?.reject(new Error(`load generator: ${reply.error}`))
    else p?.resolve(reply.result)
  })
  worker.on('error', failAll)
  worker.on('exit', (code) => failAll(new Error(`load generator exited (${code})`)))
  let nextId = 0
  const call = <T>(req: Unsent): Promise<T> => {
    if (failure) return Promise.reject(failure)
    const id = nextId++
    return new Promise<T>((resolve, reject) => {
      pending.set(id, { resolve: resolve as (v: unknown) => void, reject })
      worker.postMessage({ ...req, id })
    })
  }
  return {
    all: () => call<null>({ op: 'all' }).then(() => {}),
    sequential: (n) => call<number>({ op: 'sequential', n }),
    step: (rate, seconds) => call<StepResult>({ op: 'step', rate, seconds }),
    async close() {
      if (failure) return
      await call<null>({ op: 'close' })
      await worker.terminate()
    },
  }
}

// A decode worker: frames in, checked events out, in the order given (see decoder.ts).
import { parentPort, workerData } from 'node:worker_threads'
import type { IdResolver } from '@atproto/identity'
import { createIdentity } from '@openplane/identity'
import { decodeChecked, type WorkerReply, type WorkerRequest, type WorkerSetup } from './decoder.ts'
import type { FrameResult } from './frames.ts'
import { threadCpuSeconds } from './stages.ts'

const setup = workerData as WorkerSetup
// Without verification the resolver is never asked.
const idResolver = setup.identity
  ? createIdentity(setup.identity).idResolver
  : (undefined as unknown as IdResolver)
const opts = { verify: setup.verify, idResolver }

// One message at a time: in verifying mode decoding awaits key lookups, and interleaved messages
// would blur each one's time (and put no more work on this thread's core anyway).
let queue = Promise.resolve()
parentPort!.on('message', (req: WorkerRequest) => {
  queue = queue.then(() => handle(req))
})

async function handle(req: WorkerRequest): Promise<void> {
  const started = performance.now()
  const cpuBefore = threadCpuSeconds()
  const results: FrameResult[] = []
  let start = 0
  for (const end of req.ends) {
    // decodeChecked reports bad input as results; anything it throws is a bug, reported alike
    // rather than leaving the writer's thread waiting for an answer.
    const res = await decodeChecked(req.bytes.subarray(start, end), opts).catch(
      (err: unknown): FrameResult => ({
        kind: 'malformed',
        reason: `decoding failed: ${(err as Error).message}`,
      }),
    )
    results.push(res)
    start = end
  }
  const reply: WorkerReply = {
    id: req.id,
    results,
    seconds: (performance.now() - started) / 1000,
    cpuSeconds: threadCpuSeconds() - cpuBefore,
  }
  parentPort!.postMessage(reply)
}

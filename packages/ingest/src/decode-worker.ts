// A decode worker: frames in, checked events out, in the order given (see decoder.ts).
import { parentPort, workerData } from 'node:worker_threads'
import type { IdResolver } from '@atproto/identity'
import { createIdentity } from '@openplane/identity'
import { AskedKeys, type KeyReplies } from './asked-keys.ts'
import { decodeChecked, type WorkerReply, type WorkerRequest, type WorkerSetup } from './decoder.ts'
import type { FrameOptions, FrameResult } from './frames.ts'
import { threadCpuSeconds } from './stages.ts'
import { READY } from './worker-ready.ts'

const setup = workerData as WorkerSetup
// Without verification the resolver is never asked.
const idResolver = setup.identity
  ? createIdentity(setup.identity).idResolver
  : (undefined as unknown as IdResolver)
const keys = setup.askKeys
  ? new AskedKeys((asked) => parentPort!.postMessage(asked), {
      max: setup.identity?.cacheSize ?? 50_000,
      freshMs: setup.identity?.didStaleMs ?? 60 * 60_000,
    })
  : undefined
const opts: FrameOptions = { verify: setup.verify, idResolver, keyOf: keys?.keyOf }

// Messages are decoded as they come: in verifying mode one waiting for a key it had to ask for
// does not hold back the next. The parent pairs replies with frames by id, in any order.
parentPort!.on('message', (msg: WorkerRequest | KeyReplies) => {
  if ('keyReplies' in msg) return keys?.answered(msg)
  void handle(msg)
})

// Time and CPU are reported since the previous reply, so messages that overlap count once.
let lastReply = performance.now()
let cpuMark = threadCpuSeconds()

async function handle(req: WorkerRequest): Promise<void> {
  const started = performance.now()
  // A message's frames are started together: those whose keys must be asked for wait on one
  // question while the others are checked.
  const decoding: Promise<FrameResult>[] = []
  let start = 0
  for (const end of req.ends) {
    // decodeChecked reports bad input as results; anything it throws is a bug, reported alike
    // rather than leaving the writer's thread waiting for an answer.
    const res = decodeChecked(req.bytes.subarray(start, end), opts).catch(
      (err: unknown): FrameResult => ({
        kind: 'malformed',
        reason: `decoding failed: ${(err as Error).message}`,
      }),
    )
    decoding.push(res)
    start = end
  }
  const results = await Promise.all(decoding)
  const now = performance.now()
  const cpu = threadCpuSeconds()
  const reply: WorkerReply = {
    id: req.id,
    results,
    seconds: (now - Math.max(started, lastReply)) / 1000,
    cpuSeconds: cpu - cpuMark,
  }
  lastReply = now
  cpuMark = cpu
  parentPort!.postMessage(reply)
}

parentPort!.postMessage(READY)

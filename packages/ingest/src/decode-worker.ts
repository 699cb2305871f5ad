// A decode worker: frames in, checked events out, in the order given (see decoder.ts).
import { parentPort, workerData } from 'node:worker_threads'
import type { IdResolver } from '@atproto/identity'
import {
  decodeChecked,
  workerIdentity,
  type WorkerReply,
  type WorkerRequest,
  type WorkerSetup,
} from './decoder.ts'
import type { FrameResult } from './frames.ts'

const setup = workerData as WorkerSetup
// Without verification the resolver is never asked.
const idResolver = workerIdentity(setup) ?? (undefined as unknown as IdResolver)
const opts = { verify: setup.verify, idResolver }

parentPort!.on('message', (req: WorkerRequest) => {
  void (async () => {
    const started = performance.now()
    const results: FrameResult[] = []
    let start = 0
    for (const end of req.ends) {
      results.push(await decodeChecked(req.bytes.subarray(start, end), opts))
      start = end
    }
    const reply: WorkerReply = {
      id: req.id,
      results,
      seconds: (performance.now() - started) / 1000,
    }
    parentPort!.postMessage(reply)
  })()
})

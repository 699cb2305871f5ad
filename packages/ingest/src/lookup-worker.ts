// A lookup worker: the writer's network lookups (handles, account hosting, DID documents) on
// their own thread, answered in whatever order they finish (see lookup-thread.ts).
import { parentPort, workerData } from 'node:worker_threads'
import {
  lookupsHere,
  type LookupReply,
  type LookupReplies,
  type LookupRequests,
  type LookupSetup,
} from './lookup-thread.ts'
import { threadCpuSeconds } from './stages.ts'
import { READY } from './worker-ready.ts'

const lookups = lookupsHere(workerData as LookupSetup)

// Answers that finish in the same turn go back in one message.
let outgoing: LookupReply[] = []
let cpuMark = threadCpuSeconds()
const flush = () => {
  const now = threadCpuSeconds()
  const message: LookupReplies = { replies: outgoing, cpuSeconds: now - cpuMark }
  cpuMark = now
  outgoing = []
  parentPort!.postMessage(message)
}
const answer = (reply: LookupReply) => {
  if (!outgoing.length) setImmediate(flush)
  outgoing.push(reply)
}

parentPort!.on('message', ({ requests }: LookupRequests) => {
  for (const req of requests) {
    lookups.answer(req).then(
      (value) => answer({ id: req.id, value }),
      (err: unknown) => answer({ id: req.id, error: (err as Error).message ?? String(err) }),
    )
  }
})

parentPort!.postMessage(READY)

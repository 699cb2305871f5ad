// A lookup worker: the writer's network lookups (handles, account hosting) on their own thread,
// answered in whatever order they finish (see lookup-thread.ts).
import { parentPort, workerData } from 'node:worker_threads'
import { createIdentity } from '@openplane/identity'
import { writerDeps } from './deps.ts'
import type { LookupReply, LookupReplies, LookupRequests, LookupSetup } from './lookup-thread.ts'
import { threadCpuSeconds } from './stages.ts'

const setup = workerData as LookupSetup
const deps = writerDeps(createIdentity(setup.identity), setup.timeoutMs)

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
    const lookup =
      req.kind === 'handle' ? deps.resolveHandle(req.did, req.force) : deps.isHosted(req.did)
    lookup.then(
      (value) => answer({ id: req.id, value }),
      (err: unknown) => answer({ id: req.id, error: (err as Error).message ?? String(err) }),
    )
  }
})

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
import { ResolveQueue, type PrefetchOutcome } from './resolve-queue.ts'
import { threadCpuSeconds } from './stages.ts'
import { READY } from './worker-ready.ts'

const lookups = lookupsHere(workerData as LookupSetup)

// Answers that finish in the same turn go back in one message; background resolutions are
// counted and reported with the next answers, or within a quarter of a second.
let outgoing: LookupReply[] = []
let prefetched: Partial<Record<PrefetchOutcome, number>> = {}
/** The flush that sends counts when no answer does. */
let countsDue: NodeJS.Timeout | undefined
let cpuMark = threadCpuSeconds()
const flush = () => {
  clearTimeout(countsDue)
  countsDue = undefined
  // An answer's flush may find what it was for sent already by the counts' timer.
  if (!outgoing.length && !Object.keys(prefetched).length) return
  const now = threadCpuSeconds()
  const message: LookupReplies = { replies: outgoing, cpuSeconds: now - cpuMark, prefetched }
  cpuMark = now
  outgoing = []
  prefetched = {}
  parentPort!.postMessage(message)
}
const answer = (reply: LookupReply) => {
  if (!outgoing.length) setImmediate(flush)
  outgoing.push(reply)
}
const warmer = new ResolveQueue(
  (did) => lookups.resolveHandle(did, false),
  (outcome) => {
    prefetched[outcome] = (prefetched[outcome] ?? 0) + 1
    countsDue ??= setTimeout(flush, 250).unref()
  },
)

parentPort!.on('message', ({ requests, clearWarming, warm }: LookupRequests) => {
  if (clearWarming) warmer.clearWarming()
  if (warm) warmer.warm(warm)
  for (const req of requests) {
    lookups.answer(req).then(
      (value) => answer({ id: req.id, value }),
      (err: unknown) => answer({ id: req.id, error: (err as Error).message ?? String(err) }),
    )
  }
})

parentPort!.postMessage(READY)

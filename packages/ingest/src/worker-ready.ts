// A worker thread is stopped only once its imports have run. Node can abort the whole process
// when a worker is terminated while its module graph is still being evaluated (a top-level await
// among its imports: V8's `AsyncModuleExecutionFulfilled` check), so each worker posts READY
// after its imports, and its owner waits for that, within a bound, before terminating it.
import type { Worker } from 'node:worker_threads'

/** What a worker posts once its imports have run. */
export const READY = 'openplane:worker-ready'

/** How long stopping waits for a worker still loading. */
const READY_WAIT_MS = 10_000

/** Resolves when `worker` has posted READY, or has exited. */
export function whenReady(worker: Worker): Promise<void> {
  return new Promise((resolve) => {
    const onMessage = (msg: unknown) => {
      if (msg !== READY) return
      worker.off('message', onMessage)
      resolve()
    }
    worker.on('message', onMessage)
    worker.once('exit', () => resolve())
  })
}

/** Terminates `worker` once `ready` (whenReady) has resolved, or after a bound. */
export async function terminateWhenReady(worker: Worker, ready: Promise<void>): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  await Promise.race([ready, new Promise<void>((r) => (timer = setTimeout(r, READY_WAIT_MS)))])
  clearTimeout(timer)
  await worker.terminate()
}

/**
 * Resolves once every worker has posted READY (or exited), holding the process up meanwhile as
 * work in flight would; idle workers are let go again after (their owners keep them unref'd).
 */
export async function whenLoaded(slots: { worker: Worker; ready: Promise<void> }[]): Promise<void> {
  for (const s of slots) s.worker.ref()
  try {
    await Promise.all(slots.map((s) => s.ready))
  } finally {
    for (const s of slots) s.worker.unref()
  }
}

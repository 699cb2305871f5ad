// Keeps the published-event log (publish.ts) to its retained window: every so often, the messages
// older than the window are deleted, a slice at a time so a large backlog (a window shortened, a
// long stop) never holds one long delete beside the writer. Run by the indexing process.
import type { Kysely } from 'kysely'
import { trimPublished, type DatabaseSchema } from '@openplane/db'
import { childLogger, counter } from '@openplane/telemetry'

const log = childLogger('publish')
const trimmed = counter(
  'openplane_published_events_trimmed_total',
  'Messages deleted from the published-event log as they left the retained window',
)

const SLICE = 10_000

export interface WindowOptions {
  /** How far back the log keeps messages. */
  windowMs: number
  /** Between two trims. */
  everyMs: number
}

/** Starts trimming; returns a stop function that waits for a trim under way. */
export function keepPublishedWindow(
  db: Kysely<DatabaseSchema>,
  opts: WindowOptions,
): () => Promise<void> {
  let stopped = false
  let running: Promise<void> = Promise.resolve()
  const trim = async () => {
    const before = (Date.now() - opts.windowMs) * 1000
    let total = 0
    for (;;) {
      if (stopped) break
      const n = await trimPublished(db, before, SLICE)
      total += n
      if (n < SLICE) break
    }
    if (total) {
      trimmed.inc(total)
      log.debug({ deleted: total }, 'published events trimmed to the window')
    }
  }
  const tick = () => {
    running = trim().catch((err: unknown) => log.warn({ err }, 'published events not trimmed'))
  }
  tick()
  const timer = setInterval(tick, opts.everyMs)
  timer.unref()
  return async () => {
    stopped = true
    clearInterval(timer)
    await running
  }
}

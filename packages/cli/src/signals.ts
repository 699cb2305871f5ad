// How a long-running command ends: on SIGTERM or SIGINT it stops once, and the process exits with
// what the stop returns. Bounded: a stop that hangs (a dependency away) must not keep an
// orchestrator waiting, so past 30 s the process exits 1.
import type { Logger } from '@openplane/telemetry'

const STOP_BOUND_MS = 30_000

export function stopOnSignals(log: Logger, stop: () => Promise<number>): void {
  let stopping = false
  const run = async (signal: string) => {
    // Once: a terminal's ^C reaches a supervisor and its processes alike, then the supervisor's
    // SIGTERM follows.
    if (stopping) return
    stopping = true
    log.info({ signal }, 'stopping')
    setTimeout(() => {
      log.error({ signal }, `stop took longer than ${STOP_BOUND_MS / 1000} s; exiting`)
      process.exit(1)
    }, STOP_BOUND_MS).unref()
    process.exit(await stop())
  }
  // Kept for the whole stop, not once: a second SIGTERM (an orchestrator repeating itself) would
  // otherwise meet the default action and end the process mid-drain, by signal.
  process.on('SIGTERM', () => void run('SIGTERM'))
  process.on('SIGINT', () => void run('SIGINT'))
  // Started by a supervisor (DATAPLANE_PROCESSES): when it is gone, so is this process's reason
  // to run.
  if (process.send) process.once('disconnect', () => void run('supervisor gone'))
}

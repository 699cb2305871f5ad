// How a long-running command ends: on SIGTERM or SIGINT it stops once, and the process exits with
// what the stop returns. Bounded: a stop that hangs (a dependency away) must not keep an
// orchestrator waiting, so past 30 s the process exits 1.
import type { Logger } from '@openplane/telemetry'

const STOP_BOUND_MS = 30_000

export function stopOnSignals(log: Logger, stop: () => Promise<number>): void {
  const run = async (signal: string) => {
    log.info({ signal }, 'stopping')
    setTimeout(() => {
      log.error({ signal }, `stop took longer than ${STOP_BOUND_MS / 1000} s; exiting`)
      process.exit(1)
    }, STOP_BOUND_MS).unref()
    process.exit(await stop())
  }
  process.once('SIGTERM', () => void run('SIGTERM'))
  process.once('SIGINT', () => void run('SIGINT'))
}

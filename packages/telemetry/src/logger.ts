import { pino, type Logger } from 'pino'
import pretty from 'pino-pretty'

/**
 * JSON lines by default, for log shippers; readable lines in a terminal (pino-pretty, the
 * pretty-printer pino maintains). LOG_FORMAT=json|pretty overrides the choice; LOG_LEVEL picks
 * the threshold (silent in tests unless asked for).
 */
function destination(): pino.DestinationStream | undefined {
  const format = process.env.LOG_FORMAT?.trim().toLowerCase()
  if (format && format !== 'json' && format !== 'pretty') {
    throw new Error(`LOG_FORMAT must be json or pretty, got "${process.env.LOG_FORMAT}"`)
  }
  const wantPretty = format ? format === 'pretty' : process.stdout.isTTY === true
  if (!wantPretty) return undefined
  // Synchronous, like pino's own stdout: nothing is lost when the process exits on an error.
  return pretty({
    sync: true,
    colorize: process.stdout.isTTY === true,
    singleLine: true,
    translateTime: 'SYS:HH:MM:ss.l',
    messageFormat: '{if component}[{component}] {end}{msg}',
    ignore: 'pid,hostname,service,component',
  })
}

const options = {
  level: process.env.LOG_LEVEL ?? (process.env.VITEST ? 'silent' : 'info'),
  base: { service: 'openplane' },
}
const readable = destination()
// JSON goes through pino's own stdout destination, as it always has.
export const logger: Logger = readable ? pino(options, readable) : pino(options)

export function childLogger(component: string): Logger {
  return logger.child({ component })
}

export type { Logger }

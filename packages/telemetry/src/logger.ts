import { pino, type Logger } from 'pino'

// JSON lines on stdout; LOG_LEVEL picks the threshold (silent in tests unless asked for).
export const logger: Logger = pino({
  level: process.env.LOG_LEVEL ?? (process.env.VITEST ? 'silent' : 'info'),
  base: { service: 'openplane' },
})

export function childLogger(component: string): Logger {
  return logger.child({ component })
}

export type { Logger }

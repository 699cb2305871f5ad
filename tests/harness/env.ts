// Where tests find Postgres and Redis. Each test run works in schemas/prefixes it creates itself.
import { randomBytes } from 'node:crypto'

export const PG_URL =
  process.env.OPENPLANE_TEST_PG_URL ?? 'postgresql://postgres@127.0.0.1:5432/test'
export const REDIS_HOST = process.env.OPENPLANE_TEST_REDIS_HOST ?? '127.0.0.1:6379'

/**
 * A fresh name for this run's schemas (dev-env prefixes it with appview_ etc.). Letters only:
 * bsync refuses schema names with digits.
 */
export const uniqueName = (prefix: string): string =>
  `${prefix}_${[...randomBytes(10)].map((b) => String.fromCharCode(97 + (b % 26))).join('')}`

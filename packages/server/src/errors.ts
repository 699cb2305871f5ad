// The rpc port's edge: every answer that is not a success says what happened in the terms a
// caller can act on, and nothing from a driver (hosts, ports, SQL) reaches it.
//   - the caller's mistake → invalid_argument, naming the field where the request shows it;
//   - Postgres or the network down → unavailable (the AppView retries those);
//   - a statement cancelled for time → deadline_exceeded;
//   - this process past its capacity → resource_exhausted (not retried by the AppView);
//   - anything else → internal, with a request id the log carries beside the real error.
import { randomUUID } from 'node:crypto'
import type { DescMessage, FieldInfo, Message } from '@bufbuild/protobuf'
import { Code, ConnectError } from '@connectrpc/connect'
import { Overloaded } from '@openplane/telemetry'
import { overloaded } from './routes/util/overloaded.ts'

/**
 * Items a repeated field may hold by default: far above what the AppView asks for (a few thousand
 * URIs at most), below the 65,535 parameters one Postgres statement can bind.
 */
export const MAX_LIST_ITEMS = 25_000

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
])
const NETWORK_MESSAGES =
  /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Connection refused|the database system is (starting up|shutting down)/i

/**
 * A request field that Postgres could not take: a NUL character anywhere in a string, or a list
 * longer than `maxItems`. Returns the refusal, or undefined.
 */
export function checkRequest(
  message: Message,
  maxItems = MAX_LIST_ITEMS,
  path = '',
): ConnectError | undefined {
  const type = message.getType() as unknown as DescMessage & {
    fields: { list(): readonly FieldInfo[] }
  }
  const values = message as unknown as Record<string, unknown>
  for (const field of type.fields.list()) {
    const name = path + field.localName
    const value = values[field.localName]
    const items = field.repeated && Array.isArray(value) ? value : [value]
    if (field.repeated && items.length > maxItems) {
      return new ConnectError(
        `${name} has ${items.length} items; at most ${maxItems} are served in one request`,
        Code.InvalidArgument,
      )
    }
    for (const item of items) {
      if (typeof item === 'string' && item.includes('\u0000')) {
        return new ConnectError(`${name} contains a NUL character`, Code.InvalidArgument)
      }
      if (field.kind === 'message' && item && typeof item === 'object' && 'getType' in item) {
        const inner = checkRequest(item as Message, maxItems, `${name}.`)
        if (inner) return inner
      }
    }
  }
  return undefined
}

/**
 * A network failure further down the cause chain: fetch wraps a refused connection or an unknown
 * host (a PLC directory away) in a bare `TypeError: fetch failed`.
 */
function networkCause(err: unknown): boolean {
  let at = (err as { cause?: unknown } | undefined)?.cause
  for (let depth = 0; at && depth < 5; depth++) {
    const code = (at as { code?: unknown }).code
    if (typeof code === 'string' && NETWORK_CODES.has(code)) return true
    at = (at as { cause?: unknown }).cause
  }
  return false
}

export interface Classified {
  error: ConnectError
  /** Set for failures the log must keep (with the id the caller was given). */
  requestId?: string
}

/** The error a caller gets for what a handler threw. */
export function classify(err: unknown): Classified {
  if (
    err instanceof Overloaded ||
    (err instanceof ConnectError && err.cause instanceof Overloaded)
  ) {
    return { error: overloaded() }
  }
  if (err instanceof ConnectError && err.code !== Code.Unknown && err.code !== Code.Internal) {
    return { error: err }
  }
  const cause = err instanceof ConnectError ? (err.cause ?? err) : err
  const e = (cause ?? {}) as { code?: unknown; message?: unknown }
  const code = typeof e.code === 'string' ? e.code : ''
  const message = typeof e.message === 'string' ? e.message : ''
  if (/^[0-9A-Z]{5}$/.test(code)) {
    // Postgres's SQLSTATE.
    if (code === '57014') {
      return { error: new ConnectError('the query ran out of time', Code.DeadlineExceeded) }
    }
    if (/bind message|too many (bind )?parameters/i.test(message) || code.startsWith('54')) {
      return { error: new ConnectError('the request holds too many values', Code.InvalidArgument) }
    }
    if (code.startsWith('08') || code.startsWith('53') || /^57P0[1-3]$/.test(code)) {
      const requestId = randomUUID()
      return {
        error: new ConnectError(
          `the database is unavailable (request ${requestId})`,
          Code.Unavailable,
        ),
        requestId,
      }
    }
    if (code.startsWith('22')) {
      return {
        error: new ConnectError('a request value is not valid here', Code.InvalidArgument),
      }
    }
  }
  const requestId = randomUUID()
  if (NETWORK_CODES.has(code) || NETWORK_MESSAGES.test(message) || networkCause(cause)) {
    return {
      error: new ConnectError(
        `a dependency is unavailable (request ${requestId})`,
        Code.Unavailable,
      ),
      requestId,
    }
  }
  return {
    error: new ConnectError(`internal error (request ${requestId})`, Code.Internal),
    requestId,
  }
}

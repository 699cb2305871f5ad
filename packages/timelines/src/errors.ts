// One error type for "the store cannot answer now" (Redis down, slow, failing over), so callers
// can fall back to Postgres without inspecting driver errors.

export class TimelineStoreUnavailable extends Error {
  override readonly name = 'TimelineStoreUnavailable'
  /** The store operation that failed. */
  readonly op: string
  /**
   * For writes: readers (or authors) whose write is not confirmed. They may or may not hold it;
   * evict them once the store is back so they rebuild.
   */
  readonly unconfirmed: readonly string[]

  constructor(op: string, cause: unknown, unconfirmed: readonly string[] = []) {
    const reason = cause instanceof Error ? cause.message : String(cause)
    super(`timeline store unavailable (${op}): ${reason}`, { cause })
    this.op = op
    this.unconfirmed = unconfirmed
  }
}

export class TimeoutError extends Error {
  override readonly name = 'TimeoutError'
}

/**
 * Rejects after `ms` unless `work` settles first; the timers never outlive the race. When the
 * deadline's timer fires, the rejection waits for the rest of that event-loop turn (setImmediate
 * runs after the I/O poll): an answer that arrived in time but sat unread while the process was
 * busy is read first and wins. So a deadline measures how long the store took to answer, not how
 * far behind this process is; under CPU overload reads do not fail over to Postgres (the most
 * expensive path) just because their answers were read late.
 */
export async function withDeadline<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  let late: NodeJS.Immediate | undefined
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      late = setImmediate(() => reject(new TimeoutError(`no answer within ${ms} ms`)))
    }, ms)
  })
  try {
    return await Promise.race([work, deadline])
  } finally {
    clearTimeout(timer)
    clearImmediate(late)
  }
}

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

/** Rejects after `ms` unless `work` settles first; the timer never outlives the race. */
export async function withDeadline<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TimeoutError(`no answer within ${ms} ms`)), ms)
  })
  try {
    return await Promise.race([work, deadline])
  } finally {
    clearTimeout(timer)
  }
}

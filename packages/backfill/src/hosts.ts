// Per-PDS limits: at most `perHost` fetches at once to one host, and a host that answered 429
// is left alone until the time it named (Retry-After / RateLimit-Reset) or a growing backoff.
// Other hosts go on meanwhile, so one slow or strict PDS never stalls the whole backfill.

interface HostState {
  active: number
  pausedUntil: number
  /** Consecutive rate limits, for the backoff when the host names no time. */
  strikes: number
  waiters: (() => void)[]
  timer: NodeJS.Timeout | undefined
}

export class HostLimits {
  private readonly perHost: number
  private readonly hosts = new Map<string, HostState>()

  constructor(perHost: number) {
    this.perHost = Math.max(1, perHost)
  }

  /** Waits for a slot on `host`; call the returned function when done with it. */
  async acquire(host: string): Promise<() => void> {
    const h = this.state(host)
    while (h.active >= this.perHost || Date.now() < h.pausedUntil) {
      await new Promise<void>((resolve) => {
        h.waiters.push(resolve)
        this.wakeLater(h)
      })
    }
    h.active++
    let released = false
    return () => {
      if (released) return
      released = true
      h.active--
      this.wake(h)
    }
  }

  /** The host refused for rate: pause it until `until` (ms epoch) or a backoff. Returns the time. */
  rateLimited(host: string, until: number | undefined): number {
    const h = this.state(host)
    h.strikes++
    const backoff = Math.min(60_000 * 5, 1000 * 2 ** Math.min(h.strikes, 8))
    h.pausedUntil = Math.max(h.pausedUntil, until ?? Date.now() + backoff)
    return h.pausedUntil
  }

  /** The host answered normally: its backoff starts over. */
  ok(host: string): void {
    this.state(host).strikes = 0
  }

  /** Hosts paused now, for progress and logs. */
  paused(): number {
    const now = Date.now()
    let n = 0
    for (const h of this.hosts.values()) if (h.pausedUntil > now) n++
    return n
  }

  private state(host: string): HostState {
    let h = this.hosts.get(host)
    if (!h) {
      h = { active: 0, pausedUntil: 0, strikes: 0, waiters: [], timer: undefined }
      this.hosts.set(host, h)
    }
    return h
  }

  private wake(h: HostState): void {
    const waiters = h.waiters.splice(0)
    for (const w of waiters) w()
  }

  /** While paused, wake the waiters when the pause ends (they check again). */
  private wakeLater(h: HostState): void {
    const wait = h.pausedUntil - Date.now()
    if (wait <= 0 || h.timer) return
    h.timer = setTimeout(() => {
      h.timer = undefined
      this.wake(h)
    }, wait)
    h.timer.unref()
  }
}

/** When a 429 answer says to come back (ms epoch), from Retry-After or RateLimit-Reset. */
export function retryAtFrom(headers: Headers, now = Date.now()): number | undefined {
  const after = headers.get('retry-after')
  if (after) {
    const seconds = Number(after)
    if (Number.isFinite(seconds)) return now + seconds * 1000
    const date = Date.parse(after)
    if (Number.isFinite(date)) return date
  }
  const reset = Number(headers.get('ratelimit-reset'))
  // The PDS sends epoch seconds; small values are a delay in seconds (the IETF draft's form).
  if (Number.isFinite(reset) && reset > 0) return reset > 1e9 ? reset * 1000 : now + reset * 1000
  return undefined
}

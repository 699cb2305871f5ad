// For failures that repeat while a dependency is away (every request, every reconnect attempt):
// the first is logged at once, then at most one line per period, carrying how many were left out,
// so an outage is visible without burying everything else in the log.

export interface Throttle {
  /** Calls `write` unless one went out less than the period ago; `suppressed` counts the rest. */
  (write: (suppressed: number) => void): void
}

export function throttle(everyMs: number): Throttle {
  let last = -Infinity
  let suppressed = 0
  return (write) => {
    const now = performance.now()
    if (now - last < everyMs) {
      suppressed++
      return
    }
    last = now
    const n = suppressed
    suppressed = 0
    write(n)
  }
}

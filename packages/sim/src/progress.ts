// Progress of long generation and loading runs, on stderr so stdout stays the data or the report.

export interface ProgressOptions {
  stream?: NodeJS.WriteStream
  /** Minimum time between two lines (a TTY gets a redrawn bar more often). */
  intervalMs?: number
}

export type ProgressFn = (phase: string, done: number, total: number) => void

const BAR = 24

export function progressReporter(opts: ProgressOptions = {}): ProgressFn & { finish(): void } {
  const stream = opts.stream ?? process.stderr
  const tty = stream.isTTY === true
  const interval = opts.intervalMs ?? (tty ? 250 : 5000)
  let phase = ''
  let phaseStart = 0
  let last = 0
  let drawn = false

  const report = (name: string, done: number, total: number): void => {
    const now = performance.now()
    if (name !== phase) {
      if (drawn && tty) stream.write('\n')
      phase = name
      phaseStart = now
      last = now
    }
    const finished = done >= total
    if (!finished && now - last < interval) return
    last = now
    const seconds = (now - phaseStart) / 1000
    const rate = seconds > 0.05 ? done / seconds : 0
    const share = total > 0 ? Math.min(1, done / total) : 1
    const eta = rate > 0 && !finished ? ` eta ${formatSeconds((total - done) / rate)}` : ''
    const filled = Math.round(share * BAR)
    const bar = `[${'#'.repeat(filled)}${'.'.repeat(BAR - filled)}]`
    const line =
      `${name.padEnd(8)} ${bar} ${(share * 100).toFixed(0).padStart(3)}% ` +
      `${formatCount(done)}/${formatCount(total)}${rate >= 1 ? ` ${formatCount(rate)}/s` : ''}${eta}`
    stream.write(tty ? `\r${line}\x1b[K` : `${line}\n`)
    drawn = true
  }
  return Object.assign(report, {
    finish: () => {
      if (drawn && tty) stream.write('\n')
      drawn = false
    },
  })
}

export function formatCount(n: number): string {
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)}G`
  if (n >= 1e6) return `${(n / 1e6).toFixed(2)}M`
  if (n >= 1e4) return `${(n / 1e3).toFixed(1)}k`
  return String(Math.round(n))
}

function formatSeconds(s: number): string {
  if (s < 90) return `${Math.ceil(s)}s`
  if (s < 5400) return `${Math.ceil(s / 60)}m`
  return `${(s / 3600).toFixed(1)}h`
}

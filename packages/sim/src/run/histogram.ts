// A log-bucketed histogram of millisecond values: bounded memory (a few hundred buckets at most,
// sparse), quantiles within 1% of the true sample, exact count, sum, min and max. Runs keep one
// per time window, so percentiles over time come from raw samples without keeping the samples.

/** Values at or below this (ms) share bucket 0. */
const FLOOR_MS = 0.001
/** Bucket i holds (FLOOR·G^(i−1), FLOOR·G^i]: the midpoint is within 1% of any value in it. */
const GROWTH = 1.02
const LOG_GROWTH = Math.log(GROWTH)

export interface HistogramJson {
  count: number
  sum: number
  min: number
  max: number
  /** [bucket, count] pairs, by ascending bucket. */
  buckets: [number, number][]
}

export class LogHistogram {
  count = 0
  sum = 0
  min = Infinity
  max = -Infinity
  private readonly buckets = new Map<number, number>()

  record(ms: number): void {
    if (!Number.isFinite(ms)) return
    const v = Math.max(0, ms)
    const i = v <= FLOOR_MS ? 0 : Math.ceil(Math.log(v / FLOOR_MS) / LOG_GROWTH)
    this.buckets.set(i, (this.buckets.get(i) ?? 0) + 1)
    this.count++
    this.sum += v
    if (v < this.min) this.min = v
    if (v > this.max) this.max = v
  }

  merge(other: LogHistogram): this {
    for (const [i, c] of other.buckets) this.buckets.set(i, (this.buckets.get(i) ?? 0) + c)
    this.count += other.count
    this.sum += other.sum
    this.min = Math.min(this.min, other.min)
    this.max = Math.max(this.max, other.max)
    return this
  }

  /** The q-quantile (0..1) by nearest rank, or undefined when empty. */
  quantile(q: number): number | undefined {
    if (this.count === 0) return undefined
    if (q >= 1) return this.max
    const rank = Math.max(1, Math.ceil(q * this.count))
    let seen = 0
    for (const i of [...this.buckets.keys()].sort((a, b) => a - b)) {
      seen += this.buckets.get(i)!
      if (seen >= rank) {
        const upper = FLOOR_MS * Math.pow(GROWTH, i)
        const mid = i === 0 ? upper / 2 : (upper / GROWTH + upper) / 2
        return Math.min(this.max, Math.max(this.min, mid))
      }
    }
    return this.max
  }

  mean(): number | undefined {
    return this.count === 0 ? undefined : this.sum / this.count
  }

  toJSON(): HistogramJson {
    const buckets = [...this.buckets.entries()].sort((a, b) => a[0] - b[0])
    return {
      count: this.count,
      sum: round3(this.sum),
      min: this.count ? round3(this.min) : 0,
      max: this.count ? round3(this.max) : 0,
      buckets,
    }
  }

  static fromJSON(json: HistogramJson): LogHistogram {
    const h = new LogHistogram()
    for (const [i, c] of json.buckets) h.buckets.set(i, c)
    h.count = json.count
    h.sum = json.sum
    if (json.count > 0) {
      h.min = json.min
      h.max = json.max
    }
    return h
  }
}

const round3 = (v: number): number => Math.round(v * 1000) / 1000

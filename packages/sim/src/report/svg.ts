// Inline SVG line charts for the report: axes with "nice" ticks, one path per series (broken where
// a window has no data, unless the series connects its points), dots for sparse series, dashed
// vertical markers (scenarios joining the plan), and an HTML legend. No scripts, no external refs.

export interface ChartSeries {
  name: string
  color: string
  /** stroke-dasharray, e.g. "6 3". */
  dash?: string
  /** [x (s), y]; y undefined = no data in that window. */
  points: [number, number | undefined][]
  /** Draw across windows without data (sparse series such as firehose lag). */
  connect?: boolean
}

export interface ChartMarker {
  x: number
  label: string
}

export interface ChartOptions {
  title: string
  /** Formats a y value (ticks). */
  unit: (v: number) => string
  series: ChartSeries[]
  markers?: ChartMarker[]
  xLabel?: string
  /** Shown instead of the plot when no series has a point. */
  empty?: string
  /**
   * Logarithmic y axis; 'auto': when the values span more than 30× (say, two dataplanes whose
   * latencies differ by orders of magnitude, which a linear axis would flatten).
   */
  log?: boolean | 'auto'
}

const W = 660
const H = 250
const M = { left: 64, right: 16, top: 14, bottom: 36 }

export function escapeHtml(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
}

export function niceStep(range: number, target = 5): number {
  if (!(range > 0)) return 1
  const raw = range / target
  const p = Math.pow(10, Math.floor(Math.log10(raw)))
  const f = raw / p
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * p
}

const n1 = (v: number): string => (Math.round(v * 10) / 10).toString()

export function lineChart(opts: ChartOptions): string {
  const defined = opts.series.flatMap((s) =>
    s.points.filter((p): p is [number, number] => p[1] !== undefined && Number.isFinite(p[1])),
  )
  const title = `<h3>${escapeHtml(opts.title)}</h3>`
  if (defined.length === 0) {
    return `<figure class="chart">${title}<div class="empty">${escapeHtml(
      opts.empty ?? 'no data',
    )}</div></figure>`
  }
  const allX = opts.series.flatMap((s) => s.points.map((p) => p[0]))
  const xMax = Math.max(1, ...allX, ...(opts.markers ?? []).map((m) => m.x))
  const yMaxRaw = Math.max(...defined.map((p) => p[1]))
  const positive = defined.map((p) => p[1]).filter((y) => y > 0)
  const yMinPos = positive.length > 0 ? Math.min(...positive) : 0
  const log =
    positive.length > 0 && (opts.log === true || (opts.log === 'auto' && yMaxRaw / yMinPos > 30))
  const xStep = niceStep(xMax, 8)
  const pw = W - M.left - M.right
  const ph = H - M.top - M.bottom
  const sx = (x: number): number => M.left + (x / xMax) * pw
  let sy: (y: number) => number
  let yTicks: number[]
  if (log) {
    const lo = Math.floor(Math.log10(yMinPos))
    const hi = Math.max(lo + 1, Math.ceil(Math.log10(yMaxRaw)))
    // Values at or below zero sit on the bottom axis.
    sy = (y: number) =>
      M.top + ph - ((Math.log10(Math.max(y, Math.pow(10, lo))) - lo) / (hi - lo)) * ph
    const steps = hi - lo <= 2 ? [1, 2, 5] : [1]
    yTicks = []
    for (let e = lo; e <= hi; e++) {
      for (const m of steps) if (e < hi || m === 1) yTicks.push(m * Math.pow(10, e))
    }
  } else {
    const yStep = niceStep(yMaxRaw > 0 ? yMaxRaw : 1, 5)
    const yMax = Math.max(yStep, Math.ceil((yMaxRaw > 0 ? yMaxRaw : 1) / yStep - 1e-9) * yStep)
    sy = (y: number) => M.top + ph - (y / yMax) * ph
    yTicks = []
    for (let i = 0; i * yStep <= yMax + yStep / 1e6; i++) yTicks.push(i * yStep)
  }

  const parts: string[] = []
  // Grid and y ticks.
  for (const y of yTicks) {
    const py = n1(sy(y))
    parts.push(`<line class="grid" x1="${M.left}" x2="${W - M.right}" y1="${py}" y2="${py}"/>`)
    parts.push(
      `<text class="tick" x="${M.left - 6}" y="${py}" text-anchor="end" dominant-baseline="middle">${escapeHtml(
        opts.unit(y),
      )}</text>`,
    )
  }
  for (let x = 0; x <= xMax + xStep / 1e6; x += xStep) {
    const px = n1(sx(x))
    parts.push(`<line class="grid" x1="${px}" x2="${px}" y1="${M.top}" y2="${M.top + ph}"/>`)
    parts.push(
      `<text class="tick" x="${px}" y="${M.top + ph + 14}" text-anchor="middle">${formatSeconds(x)}</text>`,
    )
  }
  if (log) {
    parts.push(
      `<text class="scale" x="${W - M.right}" y="${M.top - 3}" text-anchor="end">log scale</text>`,
    )
  }
  parts.push(
    `<line class="axis" x1="${M.left}" x2="${W - M.right}" y1="${M.top + ph}" y2="${M.top + ph}"/>`,
    `<line class="axis" x1="${M.left}" x2="${M.left}" y1="${M.top}" y2="${M.top + ph}"/>`,
    `<text class="label" x="${M.left + pw / 2}" y="${H - 4}" text-anchor="middle">${escapeHtml(
      opts.xLabel ?? 'time since start (s)',
    )}</text>`,
  )
  for (const m of opts.markers ?? []) {
    const px = n1(sx(m.x))
    parts.push(
      `<line class="marker" x1="${px}" x2="${px}" y1="${M.top}" y2="${M.top + ph}"/>`,
      `<text class="marker-label" x="${n1(sx(m.x) + 3)}" y="${M.top + 10}">${escapeHtml(m.label)}</text>`,
    )
  }
  for (const s of opts.series) {
    const segments: string[][] = []
    let current: string[] = []
    let count = 0
    for (const [x, y] of s.points) {
      if (y === undefined || !Number.isFinite(y)) {
        if (!s.connect && current.length > 0) {
          segments.push(current)
          current = []
        }
        continue
      }
      current.push(`${n1(sx(x))},${n1(sy(y))}`)
      count++
    }
    if (current.length > 0) segments.push(current)
    const d = segments.map((seg) => `M${seg.join('L')}`).join('')
    const dash = s.dash ? ` stroke-dasharray="${s.dash}"` : ''
    parts.push(
      `<path class="series" data-series="${escapeHtml(s.name)}" data-points="${count}" d="${d}" stroke="${s.color}"${dash}/>`,
    )
    // Dots where a point stands alone (sparse data) or the series is short.
    const dots = segments.filter((seg) => seg.length === 1 || count <= 40).flat()
    for (const p of dots) {
      const [cx, cy] = p.split(',')
      parts.push(`<circle cx="${cx}" cy="${cy}" r="2.5" fill="${s.color}"/>`)
    }
  }
  const svg =
    `<svg viewBox="0 0 ${W} ${H}" role="img" aria-label="${escapeHtml(opts.title)}">` +
    `${parts.join('')}</svg>`
  const legend = opts.series
    .map(
      (s) =>
        `<span class="key"><svg width="26" height="10" aria-hidden="true"><line x1="1" x2="25" y1="5" y2="5" stroke="${s.color}" stroke-width="2.5"${
          s.dash ? ` stroke-dasharray="${s.dash}"` : ''
        }/></svg>${escapeHtml(s.name)}</span>`,
    )
    .join('')
  return `<figure class="chart">${title}${svg}<figcaption>${legend}</figcaption></figure>`
}

function formatSeconds(s: number): string {
  if (s >= 3600 && s % 60 === 0) return `${(s / 3600).toFixed(s % 3600 === 0 ? 0 : 1)}h`
  if (s >= 120 && s % 60 === 0) return `${s / 60}m`
  return `${Math.round(s * 100) / 100}s`
}

// Run reports: self-contained HTML with the summary figures and SVG charts of the windows, for one
// run or two compared; summaries from bounded per-window histograms; re-rendering from run.json
// through the CLI; the Grafana dashboard and Prometheus job for the sim's metrics.
import { execFile } from 'node:child_process'
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  createSimMetrics,
  demoRunData,
  fmtInt,
  fmtMs,
  fmtPct,
  fmtRate,
  fmtRatio,
  formatSummaryTable,
  LogHistogram,
  Recorder,
  renderReport,
  Rng,
  summarize,
  type RunData,
} from '@openplane/sim'

const root = path.resolve(import.meta.dirname, '../..')
let dir: string
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'sim-report-'))
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

const stock = demoRunData({
  label: 'stock',
  seed: 1,
  baseMs: 6,
  loadMs: 5,
  peakRps: 620,
  seconds: 60,
})
const ours = demoRunData({
  label: 'openplane',
  seed: 2,
  baseMs: 0.8,
  loadMs: 0.1,
  peakRps: 800,
  seconds: 60,
  errorRate: 0.001,
})

/** Every external reference an HTML page could load. */
const EXTERNAL = /(?:src|href|xlink:href|action)\s*=\s*["']?\s*(?:https?:)?\/\//i

function paths(html: string): { series: string; points: number; coords: number }[] {
  return [
    ...html.matchAll(/<path class="series" data-series="([^"]*)" data-points="(\d+)" d="([^"]*)"/g),
  ].map((m) => ({
    series: m[1]!,
    points: Number(m[2]),
    coords: (m[3]!.match(/-?\d+(?:\.\d+)?,-?\d+(?:\.\d+)?/g) ?? []).length,
  }))
}

describe('HTML report', () => {
  it('is self-contained: inline CSS and SVG, no scripts, nothing loaded from elsewhere', () => {
    for (const html of [renderReport([stock]), renderReport([stock, ours])]) {
      expect(html.startsWith('<!doctype html>')).toBe(true)
      expect(html).not.toMatch(EXTERNAL)
      expect(html).not.toMatch(/<script|<link|<iframe|<img|@import|url\(/i)
      expect(html).toMatch(/<style>[^<]+<\/style>/)
    }
  })

  it('shows the summary figures of a run', () => {
    const html = renderReport([ours])
    const s = summarize(ours)
    const dp = s.targets.dataplane!
    for (const figure of [
      fmtInt(dp.requests),
      fmtInt(dp.errors),
      fmtMs(dp.p50!),
      fmtMs(dp.p95!),
      fmtMs(dp.p99!),
      fmtMs(dp.max!),
      fmtRate(dp.throughput),
      fmtInt(dp.skipped),
      fmtInt(dp.late),
      fmtInt(s.posts.dispatched),
      fmtInt(s.posts.dropped),
      fmtInt(s.follows.dispatched),
      fmtPct(s.cpuAvgPct),
      fmtMs(s.lag.p50!),
    ]) {
      expect(html).toContain(`<td class="num">${figure}</td>`)
    }
    expect(dp.errors).toBeGreaterThan(0)
    expect(html).toContain('dataplane: [deadline_exceeded] timed out')
    // The plan, with the joined entry marked, also as a marker on the charts.
    expect(html).toContain('joined while running')
    expect(html).toContain('+shitstorm')
  })

  it('charts latency percentiles, throughput, sessions, event rates, lag and CPU as SVG', () => {
    const html = renderReport([stock])
    expect(html.match(/<svg viewBox=/g)?.length).toBe(6)
    for (const title of [
      'GetTimeline (dataplane) latency p50 / p95 / p99',
      'GetTimeline (dataplane) requests per second',
      'Active sessions',
      'Events dispatched per second',
      'Firehose lag: post emitted → in a follower timeline',
      'Load generator CPU (100 % = one core)',
    ]) {
      expect(html).toContain(`<h3>${title}</h3>`)
    }
    const series = paths(html)
    // The first series of a name: the latency chart's p50 comes before the lag chart's.
    const byName = new Map([...series].reverse().map((s) => [s.series, s]))
    for (const name of ['p50', 'p95', 'p99', 'ok', 'sessions', 'posts', 'follows', 'CPU']) {
      const s = byName.get(name)
      expect(s, name).toBeDefined()
      // One point per one-second window with data.
      expect(s!.points, name).toBeGreaterThanOrEqual(59)
      expect(s!.coords, name).toBe(s!.points)
    }
    // Lag is sparse (every third window): its points are joined and dotted.
    expect(byName.get('max')!.points).toBe(20)
    expect(html).toContain('<circle')
  })

  it('compares two runs: side-by-side table with ratios and overlaid series', () => {
    const html = renderReport([stock, ours])
    expect(html).toContain('Simulation comparison: stock vs openplane')
    expect(html).toContain('ratio = openplane / stock')
    const [a, b] = [summarize(stock), summarize(ours)]
    const p99 = b.targets.dataplane!.p99! / a.targets.dataplane!.p99!
    expect(p99).toBeLessThan(0.2)
    expect(html).toContain(
      `<tr><td>latency p99</td><td class="num">${fmtMs(a.targets.dataplane!.p99!)}</td>` +
        `<td class="num">${fmtMs(b.targets.dataplane!.p99!)}</td>` +
        `<td class="num ratio good">${fmtRatio(p99)}</td></tr>`,
    )
    const names = paths(html).map((s) => s.series)
    for (const name of ['stock p99', 'openplane p99', 'stock ok', 'openplane ok', 'stock CPU']) {
      expect(names).toContain(name)
    }
    // The latencies differ by orders of magnitude: the latency chart switches to a log axis.
    expect(html).toContain('log scale')

    const table = formatSummaryTable([a, b])
    expect(table.split('\n')[0]).toMatch(/^\s+stock\s+openplane\s+ratio$/)
    expect(table).toMatch(/ {2}latency p99\s+\S+ ms\s+\S+ ms\s+0\.\d\d×/)
  })
})

describe('summaries from window histograms', () => {
  it('percentiles are within 1 % of the raw samples', () => {
    const rng = new Rng(5)
    const samples: number[] = []
    const h = new LogHistogram()
    for (let i = 0; i < 20_000; i++) {
      const v = 3 * Math.exp(0.8 * rng.normal())
      samples.push(v)
      h.record(v)
    }
    samples.sort((x, y) => x - y)
    for (const q of [0.5, 0.95, 0.99]) {
      const exact = samples[Math.ceil(q * samples.length) - 1]!
      expect(Math.abs(h.quantile(q)! - exact) / exact).toBeLessThan(0.01)
    }
    expect(h.quantile(1)).toBe(samples.at(-1))
    const back = LogHistogram.fromJSON(JSON.parse(JSON.stringify(h.toJSON())))
    expect(back.quantile(0.99)).toBeCloseTo(h.quantile(0.99)!, 6)
    expect(back.count).toBe(20_000)
  })

  it('stay bounded on long runs: windows merge pairwise, doubling their width', () => {
    let now = 0
    const rec = new Recorder({ label: 'long', windowMs: 100, maxWindows: 8, clock: () => now })
    rec.start()
    const h = new LogHistogram()
    for (let t = 0; t < 2000; t += 10) {
      now = t
      rec.request('dataplane', 5 + (t % 50), true)
      h.record(5 + (t % 50))
      if (t % 100 === 0) rec.event('post', 'dispatched')
    }
    now = 2000
    const windows = rec.stop()
    expect(rec.windowMs).toBe(400)
    expect(windows).toHaveLength(6)
    expect(windows.map((w) => w.t_ms)).toEqual([0, 400, 800, 1200, 1600, 2000])
    const merged = new LogHistogram()
    for (const w of windows) {
      const latency = w.targets.dataplane?.latency
      if (latency) merged.merge(LogHistogram.fromJSON(latency))
    }
    expect(merged.count).toBe(200)
    expect(merged.quantile(0.99)).toBeCloseTo(h.quantile(0.99)!, 6)
    expect(windows.reduce((n, w) => n + w.posts.dispatched, 0)).toBe(20)
  })

  it('merges windows into the run totals', () => {
    const s = summarize(stock)
    const ok = stock.windows.reduce((n, w) => n + w.targets.dataplane!.ok, 0)
    expect(s.targets.dataplane!.ok).toBe(ok)
    expect(s.targets.dataplane!.throughput).toBeCloseTo(ok / 60, 6)
    expect(s.maxActiveSessions).toBe(Math.max(...stock.windows.map((w) => w.active_sessions)))
    expect(s.cpuAvgPct).toBeGreaterThan(0)
    expect(s.joinedEntries).toBe(1)
  })
})

describe('report CLI', () => {
  it('re-renders one run or a comparison from the saved run.json', async () => {
    const save = async (data: RunData): Promise<string> => {
      const runDir = path.join(dir, data.label)
      await mkdir(runDir, { recursive: true })
      await writeFile(path.join(runDir, 'run.json'), JSON.stringify(data))
      return runDir
    }
    const [a, b] = [await save(stock), await save(ours)]
    const cli = path.join(root, 'packages/sim/src/cli.ts')
    const run = promisify(execFile)
    const one = await run(process.execPath, [cli, 'report', a], { cwd: root })
    expect(one.stdout).toContain('GetTimeline (dataplane)')
    expect(await readFile(path.join(a, 'report.html'), 'utf8')).toContain(
      'Simulation report: stock',
    )
    const out = path.join(dir, 'both.html')
    const both = await run(process.execPath, [cli, 'report', a, b, '--out', out], { cwd: root })
    expect(both.stdout).toMatch(/latency p99 .* 0\.\d\d×/)
    expect(await readFile(out, 'utf8')).toContain('Simulation comparison: stock vs openplane')

    const bad = path.join(dir, 'bad')
    await mkdir(bad)
    await writeFile(path.join(bad, 'run.json'), '{"version": 2}')
    const err = await run(process.execPath, [cli, 'report', bad], { cwd: root }).catch(
      (e: { stderr: string; code: number }) => e,
    )
    expect(err).toMatchObject({ code: 2 })
    expect((err as { stderr: string }).stderr).toContain('run.json.version must be 1')
  })
})

describe('monitoring', () => {
  it('the Grafana dashboard queries only sim metrics the runner exports', async () => {
    const dashboard = await readFile(path.join(root, 'infra/grafana/dashboards/sim.json'), 'utf8')
    const json = JSON.parse(dashboard) as { uid: string; panels: { title: string }[] }
    expect(json.uid).toBe('openplane-sim')
    const exported = new Set(
      (await createSimMetrics('x').registry.getMetricsAsJSON()).map((m) => m.name),
    )
    const used = new Set(
      [...dashboard.matchAll(/sim_[a-z_]+/g)].map((m) => m[0].replace(/_(bucket|count|sum)$/, '')),
    )
    expect(used.size).toBeGreaterThan(8)
    expect([...used].filter((name) => !exported.has(name))).toEqual([])
    const titles = json.panels.map((p) => p.title.toLowerCase()).join('\n')
    for (const topic of [
      'latency',
      'requests',
      'active sessions',
      'posts',
      'follows',
      'lag',
      'cpu',
    ]) {
      expect(titles).toContain(topic)
    }
  })

  it('Prometheus scrapes the sim control endpoint, on the host and from the compose stack', async () => {
    const host = await readFile(path.join(root, 'infra/prometheus-host.yml'), 'utf8')
    expect(host).toMatch(/job_name: openplane-sim[\s\S]*targets: \['127\.0\.0\.1:9465'\]/)
    const stack = await readFile(path.join(root, 'infra/prometheus.yml'), 'utf8')
    expect(stack).toMatch(
      /job_name: openplane-sim[\s\S]*targets: \['host\.docker\.internal:9465'\]/,
    )
  })
})

// Side by side: the same plan against two dataplanes, one after the other, each with a fresh sink,
// then one comparison report. The second run replays the first run's effective plan (scenarios
// joined during the first run included, and its end if it was stopped by hand), so both see the
// identical event sequence.
import { writeFile } from 'node:fs/promises'
import path from 'node:path'
import { renderReport } from '../report/html.ts'
import { formatSummaryTable, summarize, type RunSummary } from '../report/summary.ts'
import type { AppviewOptions, HttpVersion } from './client.ts'
import { readReplay, runPlan, type RunOptions, type RunResult } from './runner.ts'
import type { ClosableSink } from './sink.ts'

export const COMPARE_REPORT_FILE = 'compare.html'

export interface CompareTarget {
  /** Label in reports and metrics, e.g. "stock" or "openplane"; also the run's subdirectory. */
  label: string
  dataplaneUrl: string
  httpVersion?: HttpVersion
  appview?: AppviewOptions
}

export interface CompareOptions extends Omit<
  RunOptions,
  'sink' | 'dataplaneUrl' | 'httpVersion' | 'appview' | 'label' | 'outDir'
> {
  targets: [CompareTarget, CompareTarget]
  /** A fresh sink for each run (closed after it, if it has close()). */
  sinkFor: (target: CompareTarget) => Promise<ClosableSink> | ClosableSink
  /** Gets <label>/ for each run and compare.html. */
  outDir: string
  /** Before each run, e.g. to print which one starts. */
  onRunStart?: (target: CompareTarget, index: number) => void
}

export interface CompareResult {
  runs: [RunResult, RunResult]
  summaries: RunSummary[]
  /** The comparison table as text (second / first ratios). */
  table: string
  reportPath: string
}

export async function compareRuns(opts: CompareOptions): Promise<CompareResult> {
  const { targets, sinkFor, outDir, onRunStart, ...common } = opts
  const [first, second] = targets
  if (first.label === second.label) throw new Error('the two runs need different labels')
  const results: RunResult[] = []
  for (const [i, target] of targets.entries()) {
    onRunStart?.(target, i)
    let runOpts: Omit<RunOptions, 'sink'> = {
      ...common,
      label: target.label,
      outDir: path.join(outDir, safeName(target.label)),
      dataplaneUrl: target.dataplaneUrl,
      ...(target.httpVersion ? { httpVersion: target.httpVersion } : {}),
      ...(target.appview ? { appview: target.appview } : {}),
    }
    if (i === 1) {
      const replay = await readReplay(results[0]!.dir!)
      runOpts = {
        ...runOpts,
        plan: replay.plan,
        ...(replay.maxDurationMs === undefined ? {} : { maxDurationMs: replay.maxDurationMs }),
      }
    }
    const sink = await sinkFor(target)
    try {
      results.push(await runPlan({ ...runOpts, sink }))
    } finally {
      await sink.close?.()
    }
  }
  const data = results.map((r) => r.data)
  const summaries = data.map(summarize)
  const reportPath = path.join(outDir, COMPARE_REPORT_FILE)
  await writeFile(reportPath, renderReport(data))
  return {
    runs: [results[0]!, results[1]!],
    summaries,
    table: formatSummaryTable(summaries),
    reportPath,
  }
}

const safeName = (label: string): string => label.replace(/[^A-Za-z0-9._-]+/g, '_') || 'run'

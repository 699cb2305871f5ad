// Reports of runs: summaries, the comparison table, and the self-contained HTML report.
export { renderReport, type ReportOptions } from './html.ts'
export {
  fmtInt,
  fmtMs,
  fmtPct,
  fmtRate,
  fmtRatio,
  formatSummaryTable,
  ratio,
  summarize,
  summaryRows,
  type RunSummary,
  type SummaryRow,
  type TargetSummary,
} from './summary.ts'
export { escapeHtml, lineChart, type ChartOptions, type ChartSeries } from './svg.ts'
export { demoRunData, type DemoOptions } from './demo.ts'

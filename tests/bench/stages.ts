// Where the writer's time went in a bench run: the indexer's per-phase histograms and counters
// from the process's metrics registry, summed over the run.
import { registry } from '@openplane/telemetry'

/** Where our time went: the indexer's per-phase histograms, summed over the run. */
export async function stageProfile(): Promise<string> {
  const metrics = await registry.getMetricsAsJSON()
  const lines: string[] = ['openplane stages (seconds, summed over batches):']
  for (const m of metrics) {
    if (m.name === 'openplane_identity_prefetch_total') {
      const values = m.values as { labels: Record<string, string>; value: number }[]
      lines.push(
        `  identity prefetch: ${values.map((v) => `${v.labels.outcome} ${v.value}`).join(', ')}`,
      )
    }
    if (m.name === 'openplane_lookup_cpu_seconds_total') {
      const values = m.values as { value: number }[]
      const cpu = values.reduce((n, v) => n + v.value, 0)
      lines.push(`  lookup thread cpu (of the writer's figure): ${cpu.toFixed(1)}`)
    }
    if (m.name === 'openplane_indexer_stage_seconds_total') {
      for (const v of m.values as { labels: Record<string, string>; value: number }[]) {
        lines.push(`  ${v.labels.stage}: ${v.value.toFixed(1)}`)
      }
    }
    if (m.name === 'openplane_indexer_statements_total') {
      const values = m.values as { labels: Record<string, string>; value: number }[]
      lines.push(
        `  writer statements: ${values.map((v) => `${v.labels.purpose} ${v.value}`).join(', ')}`,
      )
    }
    if (m.name === 'openplane_indexer_planned_ahead_total') {
      const values = m.values as { labels: Record<string, string>; value: number }[]
      lines.push(
        `  planned ahead: ${values.map((v) => `${v.labels.outcome} ${v.value}`).join(', ')}`,
      )
    }
    if (m.name === 'openplane_indexer_plan_passes') {
      const values = m.values as { metricName?: string; value: number }[]
      const sum = values.find((v) => v.metricName?.endsWith('_sum'))?.value ?? 0
      const count = values.find((v) => v.metricName?.endsWith('_count'))?.value ?? 0
      if (count) lines.push(`  plan passes per range: ${(sum / count).toFixed(2)}`)
    }
    if (m.name === 'openplane_indexer_plan_steps_total') {
      const values = m.values as { labels: Record<string, string>; value: number }[]
      const of = (count: string) => values.find((v) => v.labels.count === count)?.value ?? 0
      if (of('steps')) {
        lines.push(`  step runs per planned step: ${(of('runs') / of('steps')).toFixed(2)}`)
      }
    }
    if (m.name !== 'openplane_indexer_batch_seconds') continue
    const values = m.values as {
      metricName?: string
      labels: Record<string, string>
      value: number
    }[]
    for (const v of values) {
      if (!v.metricName?.endsWith('_sum')) continue
      const count = values.find(
        (c) => c.metricName?.endsWith('_count') && c.labels.phase === v.labels.phase,
      )?.value
      lines.push(`  ${v.labels.phase}: ${v.value.toFixed(1)} over ${count ?? '?'} batches`)
    }
  }
  return lines.join('\n')
}

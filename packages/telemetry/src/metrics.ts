// One registry per process. Components ask for metrics by name, so several servers or indexers
// in one process (tests, the embedded mode) share series instead of failing on re-registration.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'
import { flushTallies } from './tally.ts'

export const registry = new Registry()
collectDefaultMetrics({ register: registry, prefix: 'openplane_' })

function getOrCreate<T>(name: string, make: () => T): T {
  return (registry.getSingleMetric(name) as T | undefined) ?? make()
}

export function counter<L extends string>(name: string, help: string, labelNames: L[] = []) {
  // Read, a counter first takes what tallies counted (tally.ts).
  return getOrCreate(
    name,
    () => new Counter<L>({ name, help, labelNames, registers: [registry], collect: flushTallies }),
  )
}

export function gauge<L extends string>(name: string, help: string, labelNames: L[] = []) {
  return getOrCreate(name, () => new Gauge<L>({ name, help, labelNames, registers: [registry] }))
}

export function histogram<L extends string>(
  name: string,
  help: string,
  labelNames: L[] = [],
  buckets = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
) {
  return getOrCreate(
    name,
    () => new Histogram<L>({ name, help, labelNames, buckets, registers: [registry] }),
  )
}

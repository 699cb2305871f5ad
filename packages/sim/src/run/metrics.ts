// The run's Prometheus metrics, in a registry of their own (never the process-global one), all
// named sim_*. The control endpoint serves them on /metrics; infra/grafana/dashboards/sim.json
// charts them.
import { Counter, Gauge, Histogram, Registry } from 'prom-client'

/** Request latency buckets (seconds): fine enough for p50/p95/p99 from 0.5 ms to 5 s. */
export const LATENCY_BUCKETS = [
  0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003, 0.004, 0.005, 0.0065, 0.008, 0.01, 0.0125, 0.015,
  0.02, 0.025, 0.03, 0.04, 0.05, 0.065, 0.08, 0.1, 0.125, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.65, 0.8,
  1, 1.25, 1.5, 2, 2.5, 3, 4, 5,
]

/** Firehose lag buckets (seconds): 5 ms to 2 minutes. */
export const LAG_BUCKETS = [
  0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 7.5, 10,
  15, 20, 30, 60, 120,
]

export type SimMetrics = ReturnType<typeof createSimMetrics>

export function createSimMetrics(label: string) {
  const registry = new Registry()
  registry.setDefaultLabels({ run: label })
  const registers = [registry]
  return {
    registry,
    requestSeconds: new Histogram<'target' | 'outcome'>({
      name: 'sim_request_duration_seconds',
      help: 'Latency of session timeline requests (target: dataplane GetTimeline or appview)',
      labelNames: ['target', 'outcome'],
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    requests: new Counter<'target' | 'outcome'>({
      name: 'sim_requests_total',
      help: 'Session timeline requests by outcome: ok, error, skipped (previous still in flight)',
      labelNames: ['target', 'outcome'],
      registers,
    }),
    requestsLate: new Counter<'target'>({
      name: 'sim_requests_late_total',
      help: 'Session ticks that fired later than the lateness threshold',
      labelNames: ['target'],
      registers,
    }),
    activeSessions: new Gauge({
      name: 'sim_active_sessions',
      help: 'Sessions currently requesting timelines',
      registers,
    }),
    sessionsStarted: new Counter({
      name: 'sim_sessions_started_total',
      help: 'Sessions started',
      registers,
    }),
    events: new Counter<'kind' | 'stage'>({
      name: 'sim_events_total',
      help:
        'Posts and follows: dispatched to the emitter, created (emitted), failed, dropped ' +
        '(emitter backpressure limit exceeded)',
      labelNames: ['kind', 'stage'],
      registers,
    }),
    eventsLate: new Counter<'kind'>({
      name: 'sim_events_late_total',
      help: 'Plan events (post, follow, session) dispatched later than the lateness threshold',
      labelNames: ['kind'],
      registers,
    }),
    sinkInFlight: new Gauge({
      name: 'sim_sink_in_flight',
      help: 'Posts and follows handed to the emitter and not yet emitted',
      registers,
    }),
    lagSeconds: new Histogram({
      name: 'sim_firehose_lag_seconds',
      help: 'Time from emitting a sampled post until it shows in a follower timeline',
      buckets: LAG_BUCKETS,
      registers,
    }),
    lagTimeouts: new Counter({
      name: 'sim_firehose_lag_timeouts_total',
      help: 'Sampled posts that never showed in the follower timeline within the timeout',
      registers,
    }),
    cpuSeconds: new Counter<'mode'>({
      name: 'sim_generator_cpu_seconds_total',
      help: 'CPU time of the load generator process (mode: user, system)',
      labelNames: ['mode'],
      registers,
    }),
    cpuRatio: new Gauge({
      name: 'sim_generator_cpu_ratio',
      help: 'CPU use of the load generator over the last window (1 = one core busy)',
      registers,
    }),
    loopDelay: new Gauge({
      name: 'sim_generator_event_loop_delay_seconds',
      help: 'p99 event loop delay of the load generator over the last window',
      registers,
    }),
    planEntries: new Gauge({
      name: 'sim_plan_entries',
      help: 'Entries in the effective simulation plan (joined scenarios included)',
      registers,
    }),
    planOffset: new Gauge({
      name: 'sim_plan_offset_seconds',
      help: 'Current runtime offset in plan time',
      registers,
    }),
  }
}

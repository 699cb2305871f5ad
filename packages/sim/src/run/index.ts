// Running simulation plans: the runner, its control endpoint, sessions, firehose-lag probes,
// metrics, and side-by-side comparison of two dataplanes.
export {
  appviewTarget,
  dataplaneClient,
  dataplaneTarget,
  detectHttpVersion,
  type AppviewOptions,
  type DataplaneClient,
  type HttpVersion,
  type TimelineTarget,
} from './client.ts'
export {
  COMPARE_REPORT_FILE,
  compareRuns,
  type CompareOptions,
  type CompareResult,
  type CompareTarget,
} from './compare.ts'
export { ConflictError, type ControlServer } from './control.ts'
export {
  PLAN_FILE,
  readRunData,
  REPORT_FILE,
  RUN_DATA_FILE,
  type EffectivePlanEntry,
  type EventCounts,
  type RunData,
  type RunSettings,
  type StopReason,
  type TargetWindow,
  type WindowData,
} from './data.ts'
export { Recorder, type RecorderOptions } from './recorder.ts'
export { EventQueue, sortScenario, type PlanEvent, type SortedScenario } from './events.ts'
export { userbaseFollowerOf } from './followers.ts'
export { LogHistogram, type HistogramJson } from './histogram.ts'
export type { LagOptions } from './lag.ts'
export { createSimMetrics, LAG_BUCKETS, LATENCY_BUCKETS, type SimMetrics } from './metrics.ts'
export {
  formatPlan,
  readReplay,
  runPlan,
  startRun,
  type ReplaySource,
  type Run,
  type RunOptions,
  type RunResult,
  type RunStatus,
} from './runner.ts'
export type { ClosableSink, EventSink, PostRef } from './sink.ts'

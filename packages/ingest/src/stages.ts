// Time per ingest stage, shared by the frame decoder (decoder.ts) and the batch writer (batch/run.ts).
import { counter } from '@openplane/telemetry'

export const stageSeconds = counter(
  'openplane_indexer_stage_seconds_total',
  'Time spent per ingest stage (decode: frames to events; load: bulk reads; plan: planning; apply: writes)',
  ['stage'],
)

/** CPU of the threads that decode frames: what the writer's thread is spared. */
export const decodeCpuSeconds = counter(
  'openplane_decode_cpu_seconds_total',
  'CPU time of the threads decoding frames (decode workers, or the writer thread without them)',
)

/** This thread's CPU seconds so far. */
export function threadCpuSeconds(): number {
  const { user, system } = process.threadCpuUsage()
  return (user + system) / 1e6
}

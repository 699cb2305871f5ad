// Time per ingest stage, shared by the frame decoder (decoder.ts) and the batch writer (batch/run.ts).
import { counter } from '@openplane/telemetry'

export const stageSeconds = counter(
  'openplane_indexer_stage_seconds_total',
  'Time spent per ingest stage (decode: frames to events; load: bulk reads; plan: planning; apply: writes)',
  ['stage'],
)

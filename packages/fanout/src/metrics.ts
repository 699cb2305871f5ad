// What operators watch to know the fast path is serving: which path answered each home timeline
// read and why, fan-out volume and lag, lossy drops, rebuilds, and the store's health.
import { counter, gauge, histogram } from '@openplane/telemetry'

export const reads = counter(
  'openplane_timeline_reads_total',
  'Home timeline reads by the path that answered (store, postgres; refused: overloaded, answered resource_exhausted) and why',
  ['path', 'reason'],
)
export const celebrityLists = counter(
  'openplane_timeline_celebrity_lists_total',
  'Celebrity lists named by home timeline reads, by who answered (copy: the copy this process keeps still held; redis: read, or passed over as too old for the page)',
  ['how'],
)
export const fanoutWrites = counter(
  'openplane_timeline_fanout_writes_total',
  'Feed items written into reader timelines (materialised readers only)',
)
export const fanoutItems = counter(
  'openplane_timeline_fanout_items_total',
  'Feed items handled by fan-out, by route (followers, celebrity)',
  ['route'],
)
export const lossyDropped = counter(
  'openplane_timeline_lossy_dropped_total',
  'Fan-out writes skipped by the lossy rule for readers following more than the limit',
)
export const fanoutSeconds = histogram(
  'openplane_timeline_fanout_seconds',
  'Time to apply one committed batch to the graph and the timelines',
  [],
  [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
)
export const fanoutQueue = gauge(
  'openplane_timeline_fanout_queue_batches',
  'Committed batches waiting for fan-out',
)
export const storeErrors = counter(
  'openplane_timeline_store_errors_total',
  'Timeline store operations that failed (Redis unreachable, slow or failing over)',
  ['op'],
)
export const staleDropped = counter(
  'openplane_timeline_stale_dropped_total',
  'Lists dropped after a failed fan-out write to them (each rebuilds on its next read), by kind',
  ['kind'],
)
export const storeHealthy = gauge(
  'openplane_timeline_store_healthy',
  '1 when timelines are served from the store, 0 while reads go to Postgres after a failure',
)
export const rebuilds = counter(
  'openplane_timeline_rebuilds_total',
  'Lists rebuilt from Postgres (reader timelines, author lists) and how they ended',
  ['kind', 'outcome'],
)
export const evicted = counter(
  'openplane_timeline_evicted_total',
  'Reader timelines dropped for inactivity (hibernation)',
)
export const graphEdges = gauge('openplane_graph_edges', 'Follow edges in the in-memory graph')
export const celebrityCount = gauge(
  'openplane_graph_celebrities',
  'Authors at or above the celebrity threshold (merged at read time, not fanned out)',
)
export const feedApplied = counter(
  'openplane_graph_feed_applied_total',
  'Follow changes applied from the graph change feed (servers without the indexer)',
)
export const feedReloads = counter(
  'openplane_graph_feed_reloads_total',
  'Graph loads from Postgres by a feed reader: at start, or after a break in the feed (gap, malformed)',
  ['reason'],
)
export const feedAppendFailures = counter(
  'openplane_graph_feed_append_failures_total',
  'Graph change feed appends that failed (readers then reload their graph)',
)

// The backfill's metrics, shared by the worker's loop, its repo jobs and its writes.
import { counter, gauge } from '@openplane/telemetry'

export const reposTotal = counter(
  'openplane_backfill_repos_total',
  'Repos backfilled, by outcome',
  ['outcome'],
)
export const recordsTotal = counter(
  'openplane_backfill_records_total',
  'Records of backfilled repos, by what the index needed (created, updated, deleted, unchanged, bad)',
  ['change'],
)
export const bytesTotal = counter('openplane_backfill_bytes_total', 'CAR bytes fetched')
export const failuresTotal = counter(
  'openplane_backfill_fetch_failures_total',
  'Failed repo fetches, by kind (a retried fetch counts each time)',
  ['kind'],
)
export const inFlight = gauge('openplane_backfill_in_flight', 'Repos being fetched or written')
export const outOfSyncRepos = gauge(
  'openplane_repos_out_of_sync',
  'Repos whose last fetch failed, waiting to be fetched again',
)
export const outOfSyncOldest = gauge(
  'openplane_repos_out_of_sync_oldest_seconds',
  'How long the repo out of sync the longest has been failing to fetch',
)

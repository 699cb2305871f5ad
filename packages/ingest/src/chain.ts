// Sync 1.1: a repo's commits chain by rev (each commit names the rev before it, `since`). A commit
// whose `since` is not the rev last indexed for its repo means events were missed (a relay that
// dropped some, a gap in a stream); a #sync event says the repo was reset to a rev. Either way,
// when it disagrees with what is indexed, the repo should be fetched again whole: the writer
// reports such repos once their batch commits, and the backfill refetches them (Backfill
// .followResyncs). Repos never indexed have no chain to break; but a repo's first commit (no
// since) starts from nothing, so on a repo the index never saw it follows the index exactly.
import { counter } from '@openplane/telemetry'
import type { IngestEvent } from './events.ts'

const outOfSync = counter(
  'openplane_firehose_out_of_sync_total',
  'Live events showing a repo out of sync with the index, by why (a broken since chain, a #sync)',
  ['reason'],
)

/**
 * The repos of the batch whose events break their chain, given the rev indexed for each (absent:
 * never indexed), each repo's rev as the batch leaves it (for the batch after it), and the
 * commits that follow a known rev exactly (`chained`: what they change starts from the index),
 * or, as a repo's first commit, a repo never indexed (not in `indexed`, not earlier in the batch).
 */
export function brokenChains(
  batch: IngestEvent[],
  indexed: Map<string, string | null>,
): { repos: Set<string>; revs: Map<string, string>; chained: Set<IngestEvent> } {
  const revs = new Map<string, string>()
  const repos = new Set<string>()
  const chained = new Set<IngestEvent>()
  for (const evt of batch) {
    if (evt.type !== 'commit' && evt.type !== 'sync') continue
    const last = revs.get(evt.did) ?? indexed.get(evt.did) ?? undefined
    revs.set(evt.did, evt.rev)
    if (last === undefined || last === null) {
      if (evt.type === 'commit' && evt.since === null && !indexed.has(evt.did)) {
        // Without an earlier event of the batch either (`last` would be its rev).
        chained.add(evt)
      }
      continue
    }
    if (evt.type === 'sync') {
      if (evt.rev === last) continue
      outOfSync.inc({ reason: 'sync' })
    } else {
      // Jetstream's events carry no since: nothing to check.
      if (evt.since === undefined) continue
      if (evt.since === last) {
        chained.add(evt)
        continue
      }
      outOfSync.inc({ reason: 'since' })
    }
    repos.add(evt.did)
  }
  return { repos, revs, chained }
}

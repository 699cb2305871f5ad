// Which accounts this deployment indexes. A full-network deployment has no scope; a community
// deployment (@openplane/community) indexes its members only. The writer consults the scope as
// each batch is written, after the batches before it committed, so a membership change made by
// one batch (a list item, a follow) already applies to the next.
import { counter } from '@openplane/telemetry'
import type { IngestEvent } from './events.ts'

const outOfScope = counter(
  'openplane_scope_skipped_events_total',
  'Live events of accounts outside the indexed community, skipped',
  ['type'],
)

export interface Scope {
  /** Whether the account's events are indexed. */
  has(did: string): boolean
  /** Changes whenever the set of accounts does: a batch planned before is planned again. */
  readonly version: number
  /**
   * Resolves once what committed batches changed in the set is taken in (it may read Postgres);
   * the writer waits for it before each batch.
   */
  settled(): Promise<void>
}

/**
 * The batch with each event of an account outside the scope replaced by a skip (the cursor still
 * moves past it). `peek`: counts nothing (a batch planned ahead is scoped again when written).
 */
export function scoped(
  scope: Scope | undefined,
  batch: IngestEvent[],
  peek = false,
): IngestEvent[] {
  if (!scope) return batch
  let out: IngestEvent[] | undefined
  for (const [i, evt] of batch.entries()) {
    if (!evt.did || evt.type === 'purge' || scope.has(evt.did)) continue
    if (!peek) outOfScope.inc({ type: evt.type })
    out ??= batch.slice()
    out[i] = { type: 'skip', seq: evt.seq, time: evt.time, did: '' }
  }
  return out ?? batch
}

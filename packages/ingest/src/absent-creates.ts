// Creates whose rows are known absent before the batch, so planning need not ask Postgres for
// them. A commit that follows the rev indexed for its repo exactly starts from what the index
// holds, and a create names a key its repo did not hold at that rev (the MST's rule): none of
// the rows keyed by that record's URI can exist (batch/absent.ts). On a live firehose most
// events are such creates, and reading their own rows was a probe per table per record and a
// second planning pass.
//
// Left out, as the index may hold what the repo does not: repos whose chain breaks anywhere in
// the batch, repos whose last fetch failed (their live events were applied without the repo
// behind them), repos an account deletion or purge in the batch touches (feed items outlive
// them), and any URI an earlier event of the batch touched. A PDS that sends a create for a
// record it holds (unverified streams take its word) makes the insert conflict; the writer
// then plans the batch again without this knowledge (writer.ts).
import type { CommitOp, IngestEvent } from './events.ts'
import { opUri } from './checks.ts'

export function absentCreates(
  batch: IngestEvent[],
  chained: ReadonlySet<IngestEvent>,
  untrusted: ReadonlySet<string>,
): Set<CommitOp> {
  const out = new Set<CommitOp>()
  const deleted = new Set<string>()
  for (const evt of batch) {
    if (evt.type === 'purge' || (evt.type === 'account' && !evt.active)) deleted.add(evt.did)
  }
  const touched = new Set<string>()
  for (const evt of batch) {
    if (evt.type !== 'commit') continue
    const known = chained.has(evt) && !untrusted.has(evt.did) && !deleted.has(evt.did)
    for (const op of evt.ops) {
      const uri = opUri(evt.did, op)
      if (touched.has(uri)) continue
      touched.add(uri)
      if (known && op.action === 'create') out.add(op)
    }
  }
  return out
}

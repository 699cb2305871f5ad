// The record checks that need nothing but the record (the lexicon, the stock's rules on the
// record and its place), run where the frame is decoded so that the writer's thread only plans.
import { lexStringify } from '@atproto/lex-json'
import { InvalidRecordError, pluginFor, type RecordRef } from '@openplane/plugins'
import type { CommitOp, IngestEvent } from './events.ts'

type LexValue = Parameters<typeof lexStringify>[0]
type Commit = Extract<IngestEvent, { type: 'commit' }>

/** The URI of the record an op of `did`'s repo names. */
export const opUri = (did: string, op: Pick<CommitOp, 'collection' | 'rkey'>): string =>
  `at://${did}/${op.collection}/${op.rkey}`

export function refOf(evt: Commit, op: CommitOp): RecordRef {
  return {
    uri: opUri(evt.did, op),
    did: evt.did,
    collection: op.collection,
    rkey: op.rkey,
    cid: op.cid ?? '',
    indexedAt: evt.time,
  }
}

/**
 * Marks each created or updated record of a commit valid (with its JSON) or invalid (with the
 * reason, record dropped), unless it was judged already. A check that fails otherwise than by
 * refusing the record leaves the op unmarked: the writer checks it again and reports that
 * failure itself.
 */
export function checkRecords(evt: Commit): void {
  for (const op of evt.ops) {
    // Deletes carry no record; an op judged where it was read keeps that verdict.
    if (op.action === 'delete' || op.checked) continue
    const plugin = pluginFor(op.collection)
    if (!plugin) continue
    try {
      const rec = plugin.parse(op.record)
      plugin.check?.(refOf(evt, op), rec)
      op.checked = { json: lexStringify(rec as LexValue) }
    } catch (err) {
      if (!(err instanceof InvalidRecordError)) continue
      op.checked = { invalid: err.message }
      delete op.record
    }
  }
}

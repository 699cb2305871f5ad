// An event the plan applied, as planning notes it for the published-event log (publish.ts): a
// record op of a commit, an identity change with the handle it left, an account's status.
import type { CommitOp, IngestEvent } from '../events.ts'

type Commit = Extract<IngestEvent, { type: 'commit' }>

export type Applied =
  | { kind: 'commit'; evt: Commit; op: CommitOp }
  /** `handle`: the verified handle the event left the account with (undefined: none). */
  | { kind: 'identity'; evt: IngestEvent; handle: string | undefined }
  | { kind: 'account'; evt: Extract<IngestEvent, { type: 'account' }>; deleted: boolean }

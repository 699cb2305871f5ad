// What the indexer consumes: one entry per firehose message, already parsed and checked.
// Ops of one commit stay together so a batch boundary never splits a commit.

export interface CommitOp {
  action: 'create' | 'update' | 'delete'
  collection: string
  rkey: string
  /** The record's CID (create/update). */
  cid?: string
  /** The decoded record (create/update). */
  record?: unknown
  /**
   * The record's lexicon and stock-rule check, done where the frame was decoded: its JSON when
   * valid, the reason when not (the record is then left out). Absent: not checked there.
   */
  checked?: { json: string } | { invalid: string }
  /**
   * Set by a backfill on a create in a repo whose records it found none of in the index, nor
   * its feed items: no row keyed by this record's URI exists (batch/absent.ts).
   */
  unseen?: true
}

interface Base {
  seq: number
  /** Event time from the firehose; the stock stamps `indexedAt` with it. */
  time: string
  did: string
}

export type IngestEvent =
  | (Base & {
      type: 'commit'
      commit: string
      rev: string
      /** The rev this commit follows (null: the repo's first); absent when the source omits it. */
      since?: string | null
      ops: CommitOp[]
      /**
       * Set by a backfill on a repo whose records it found none of in the index: nothing of the
       * repo was written since, so no row its records make by their creator exists either
       * (batch/absent.ts).
       */
      firstWrite?: true
    })
  | (Base & { type: 'sync'; commit: string; rev: string })
  | (Base & { type: 'identity' })
  | (Base & { type: 'account'; active: boolean; status?: string })
  /**
   * The account leaves this deployment's scope (a community member removed): its whole index
   * goes, as on a confirmed account deletion, without asking its PDS. Never from a stream.
   */
  | (Base & { type: 'purge' })
  /** A frame with nothing to apply; it only moves the cursor. */
  | { type: 'skip'; seq: number; time: string; did: '' }

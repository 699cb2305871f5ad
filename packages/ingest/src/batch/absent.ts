// Reads whose answer a backfill already knows. It reads a repo's records before writing them;
// when the index had none of them (nor feed items, which outlive a deleted account), every row
// keyed by one of the records it creates is absent, and so, until the repo's first write, is
// every row its records make by their creator. Planning answers those reads "nothing" without
// asking Postgres: on a fresh fork's backfill they are almost all of a step's reads, and each one
// asked costs the step a second planning pass and the database an index probe.
import { BY_CREATOR as DELETED_BY_CREATOR, EMBEDS } from '../actors.ts'
import { opUri } from '../checks.ts'
import type { CommitOp, IngestEvent } from '../events.ts'

/**
 * Tables of a record's own rows, by `uri` and `creator`: an account deletion removes them all
 * (`actors.ts` deleteAccount: these by name, the rest by its list), a record's delete its own.
 */
const OWN = [
  'post',
  'like',
  'repost',
  'follow',
  'list_item',
  'thread_gate',
  'post_gate',
  ...DELETED_BY_CREATOR,
]

/**
 * Tables whose rows are written only in indexing the record at the URI in this column, and go
 * with that record or its account. `feed_item` outlives a deleted account, as in the stock: a
 * repo with feed items left is not fresh (the backfill looks). Left out: rows that outlive both
 * and are not looked for (`quote`, `op_thread_reply`, `starter_pack`, `verification`) and rows
 * others write (`post_agg`, `thread_mute`, …).
 */
const BY_RECORD: Readonly<Record<string, string>> = {
  record: 'uri',
  duplicate_record: 'uri',
  feed_item: 'uri',
  ...Object.fromEntries(OWN.map((t) => [t, 'uri'])),
  ...Object.fromEntries(EMBEDS.map((t) => [t, 'postUri'])),
}

/** Tables whose rows only their creator's own records write, by this column. */
const BY_CREATOR: Readonly<Record<string, string>> = Object.fromEntries(
  OWN.map((t) => [t, 'creator']),
)

/** What a range's base state is known not to hold. */
export class Absent {
  private readonly uris: ReadonlySet<string>
  private readonly creators: ReadonlySet<string>

  constructor(uris: ReadonlySet<string>, creators: ReadonlySet<string>) {
    this.uris = uris
    this.creators = creators
  }

  /** Whether no row of `table` with these values in `columns` can be in the database. */
  has(table: string, columns: readonly string[], values: readonly unknown[]): boolean {
    const byRecord = BY_RECORD[table]
    if (byRecord !== undefined && this.uris.size) {
      const i = columns.indexOf(byRecord)
      if (i >= 0 && this.uris.has(values[i] as string)) return true
    }
    const byCreator = BY_CREATOR[table]
    if (byCreator !== undefined && this.creators.size) {
      const i = columns.indexOf(byCreator)
      if (i >= 0 && this.creators.has(values[i] as string)) return true
    }
    return false
  }
}

/**
 * What is known absent before events [from, to) of `batch`: the URIs created by ops a backfill
 * marked or `creates` names (absent-creates.ts), and the creators whose first write the backfill
 * marked, unless an earlier range of the batch wrote something of that repo already.
 */
export function absentBefore(
  batch: IngestEvent[],
  from: number,
  to: number,
  creates?: ReadonlySet<CommitOp>,
): Absent | undefined {
  let uris: Set<string> | undefined
  let creators: Set<string> | undefined
  for (let i = from; i < to; i++) {
    const evt = batch[i]!
    if (evt.type !== 'commit') continue
    for (const op of evt.ops) {
      if ((op.unseen || creates?.has(op)) && op.action === 'create') {
        ;(uris ??= new Set()).add(opUri(evt.did, op))
      }
    }
    if (evt.firstWrite) (creators ??= new Set()).add(evt.did)
  }
  if (!uris && !creators) return undefined
  if (creators) for (let i = 0; i < from; i++) creators.delete(batch[i]!.did)
  return new Absent(uris ?? new Set(), creators ?? new Set())
}

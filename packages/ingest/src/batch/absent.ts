// Reads whose answer a backfill already knows. It reads a repo's records before writing them;
// when the index had none of them (nor feed items, which outlive a deleted account), every row
// keyed by one of the records it creates is absent, and so, until the repo's first write, is
// every row its records make by their creator. Planning answers those reads "nothing" without
// asking Postgres: on a fresh fork's backfill they are almost all of a step's reads, and each one
// asked costs the step a second planning pass and the database an index probe.
import type { IngestEvent } from '../events.ts'

/**
 * Tables whose rows are written only in indexing the record at the URI in this column, and go
 * with that record (its delete) or its account (an account deletion removes them). `feed_item`
 * outlives a deleted account, as in the stock: a repo with feed items left is not fresh (the
 * backfill looks). Left out: rows that outlive both and are not looked for (`quote`,
 * `op_thread_reply`, `starter_pack`, `verification`) and rows others write (`post_agg`,
 * `thread_mute`, …).
 */
const BY_RECORD: Readonly<Record<string, string>> = {
  record: 'uri',
  duplicate_record: 'uri',
  post: 'uri',
  like: 'uri',
  repost: 'uri',
  follow: 'uri',
  actor_block: 'uri',
  list: 'uri',
  list_item: 'uri',
  list_block: 'uri',
  profile: 'uri',
  feed_generator: 'uri',
  labeler: 'uri',
  reference_list_opt_out: 'uri',
  thread_gate: 'uri',
  post_gate: 'uri',
  post_embed_image: 'postUri',
  post_embed_external: 'postUri',
  post_embed_record: 'postUri',
  post_embed_video: 'postUri',
  post_embed_gallery_image: 'postUri',
  feed_item: 'uri',
}

/**
 * Tables whose rows only their creator's own records write, by this column, all removed with its
 * account (`actors.ts` deleteAccount).
 */
const BY_CREATOR: Readonly<Record<string, string>> = {
  post: 'creator',
  like: 'creator',
  repost: 'creator',
  follow: 'creator',
  actor_block: 'creator',
  list: 'creator',
  list_item: 'creator',
  list_block: 'creator',
  profile: 'creator',
  feed_generator: 'creator',
  labeler: 'creator',
  reference_list_opt_out: 'creator',
  thread_gate: 'creator',
  post_gate: 'creator',
}

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
 * What the backfill's marks on events [from, to) of `batch` make known absent before the range:
 * the URIs their marked ops create, and the creators whose first write they are, unless an
 * earlier range of the batch wrote something of that repo already.
 */
export function absentBefore(batch: IngestEvent[], from: number, to: number): Absent | undefined {
  let uris: Set<string> | undefined
  let creators: Set<string> | undefined
  for (let i = from; i < to; i++) {
    const evt = batch[i]!
    if (evt.type !== 'commit') continue
    for (const op of evt.ops) {
      if (op.unseen && op.action === 'create') {
        ;(uris ??= new Set()).add(`at://${evt.did}/${op.collection}/${op.rkey}`)
      }
    }
    if (evt.firstWrite) (creators ??= new Set()).add(evt.did)
  }
  if (!uris && !creators) return undefined
  if (creators) for (let i = 0; i < from; i++) creators.delete(batch[i]!.did)
  return new Absent(uris ?? new Set(), creators ?? new Set())
}

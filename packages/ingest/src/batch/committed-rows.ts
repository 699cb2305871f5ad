// Rows as the writer's committed batches left them, kept between batches for the tables only the
// writer writes. A batch reads the rows its records touch by primary key (a reply's parent and
// the thread above it, the post a like or repost names, the like an unlike removes); most of them
// were written or read by a batch a few seconds before, and each one asked of Postgres is an index
// probe there and a planning pass here. A key found here is taken as read.
//
// Correct only because nothing else writes these rows: one process writes the index (the
// writer lock), and its every write goes through a batch's plan (whose committed rows are put
// here once its COMMIT is known to have gone through) or an account deletion (whose rows are
// forgotten here). The rpcs write other tables (`record` and `actor` takedowns, bsync's,
// labels'), which are never kept. A key absent from the database is kept as null, so a reply to a
// post never indexed is not asked for again either.
//
// Only `post` is kept: a thread is read again and again as replies come, while a like or a
// follow is read again only to be deleted. Keeping every row a batch writes (`record`, `like`,
// `feed_item`: three or four a record) cost the writer's thread more in keeping them, most of it
// the collector's, than Postgres was spared (measured, docs/benchmarks-history.md).
/** A row as batch/state.ts holds it, by column. */
type Row = Record<string, unknown>

/** Tables the writer alone writes and reads again by primary key while planning. */
export const KEPT_TABLES: ReadonlySet<string> = new Set(['post'])

/** Keys kept at most (default of DATAPLANE_WRITER_KEPT_POSTS): about 90 MB of posts. */
export const KEPT_ROWS = 100_000

const SEP = '\u0001'

/** What one committed part of a batch did to the kept rows. */
export type CommittedPart =
  | PlannedPart
  /** An account whose rows were deleted outside a plan. */
  | { account: string }

/** What a planned part of a batch did. */
export interface PlannedPart {
  /** Each key's row once it committed (null: none). */
  rows: { table: string; key: string; row: Row | null }[]
  /** For committed-repos.ts: the handle and check time of each actor it wrote (null: deleted). */
  actors?: [string, { handle: string | null; indexedAt: string } | null][]
  /** For committed-repos.ts: the rev it recorded for each repo (actor_sync). */
  revs?: [string, string | null][]
}

export class CommittedRows {
  private readonly max: number
  /** table SEP key → row (null: known absent); in order of last use, the oldest first. */
  private readonly rows = new Map<string, Row | null>()

  constructor(max = KEPT_ROWS) {
    this.max = max
  }

  get size(): number {
    return this.rows.size
  }

  /** Whether `table`'s rows are kept at all. */
  keeps(table: string): boolean {
    return this.max > 0 && KEPT_TABLES.has(table)
  }

  /** The committed row at `key` (null: none), or undefined when not kept. */
  get(table: string, key: string): Row | null | undefined {
    if (!this.keeps(table)) return undefined
    const id = table + SEP + key
    const row = this.rows.get(id)
    if (row === undefined) return undefined
    // Used: the last to go.
    this.rows.delete(id)
    this.rows.set(id, row)
    return row
  }

  /** A committed batch's parts, in the order they committed. */
  apply(parts: readonly CommittedPart[]): void {
    for (const part of parts) {
      if ('account' in part) this.forgetAccount(part.account)
      else for (const { table, key, row } of part.rows) this.set(table, key, row)
    }
  }

  private set(table: string, key: string, row: Row | null): void {
    if (!this.keeps(table)) return
    const id = table + SEP + key
    this.rows.delete(id)
    this.rows.set(id, row)
    if (this.rows.size > this.max) this.rows.delete(this.rows.keys().next().value!)
  }

  /**
   * An account deletion removed its records' rows: every kept key under its DID goes (the kept
   * tables are keyed by record URI). Called as the deletion is made, for the rest of its batch,
   * and again when the batch commits, for what the batch's parts before it put here.
   */
  forgetAccount(did: string): void {
    const prefix = `at://${did}/`
    for (const id of this.rows.keys()) {
      if (id.slice(id.indexOf(SEP) + 1).startsWith(prefix)) this.rows.delete(id)
    }
  }
}

// The plugin contract. A plugin turns one record into declared effects; it never writes.
// The writer (in @openplane/ingest) plans a whole batch against the index as the batch leaves it,
// then writes each table once, so batching, duplicate handling, exact counter deltas and
// exactly-once replay live in one place.
import type { Insertable, Selectable } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'

export type Tables = DatabaseSchema
export type TableName = keyof Tables & string

export type WhereValue = string | number | boolean | null

/**
 * Read access to the index as the batch has left it so far, synchronous: the writer loads in
 * bulk whatever a batch's reads ask for and plans again, so a plugin reads as if everything were
 * in memory. Reads are by equality on columns; a plugin reads row by row (a thread upwards one
 * parent at a time), never with SQL. Plugins must not write.
 */
export interface Reader {
  rows<T extends TableName>(table: T, where: Record<string, WhereValue>): Selectable<Tables[T]>[]
  first<T extends TableName>(
    table: T,
    where: Record<string, WhereValue>,
  ): Selectable<Tables[T]> | undefined
}

/** One record operation as it reaches a plugin. */
export interface RecordRef {
  uri: string
  did: string
  collection: string
  rkey: string
  cid: string
  /** The firehose event time; the stock indexer stamps `indexedAt` with it as well. */
  indexedAt: string
}

export type NotificationRow = Insertable<Tables['notification']>

export type Counter = (
  | {
      table: 'post_agg'
      key: string
      column: 'likeCount' | 'replyCount' | 'repostCount' | 'quoteCount' | 'bookmarkCount'
    }
  | {
      table: 'profile_agg'
      key: string
      column: 'followersCount' | 'followsCount' | 'postsCount'
    }
) & {
  /** Change of the count; a zero still creates the row, as the stock's recount would. */
  delta: number
}

export type RowInsert = {
  [T in TableName]: {
    kind: 'insert'
    table: T
    /** Left alone when its key or another unique key is taken (`on conflict do nothing`). */
    values: Insertable<Tables[T]>
  }
}[TableName]

export type RowDelete = {
  [T in TableName]: { kind: 'delete'; table: T; where: Partial<Record<string, string>> }
}[TableName]

export type RowUpdate = {
  [T in TableName]: {
    kind: 'update'
    table: T
    where: Partial<Record<string, string>>
    set: Partial<Record<string, unknown>>
  }
}[TableName]

export type RowWrite = RowInsert | RowDelete | RowUpdate

export interface Effects {
  /** Secondary rows (embeds, feed items, flags on other rows), applied in order. */
  rows?: RowWrite[]
  counters?: Counter[]
  notifications?: NotificationRow[]
  /** Notifications caused by these records are removed (applied before new ones are added). */
  deleteNotificationsFor?: string[]
}

export const NO_EFFECTS: Effects = Object.freeze({})

export interface RecordPlugin<Rec = unknown, T extends TableName = TableName> {
  collection: string
  /** The table holding one row per record, keyed by `uri`; null for record-only collections. */
  table: T | null
  /** Lexicon check and shape: throws on an invalid record. */
  parse(record: unknown): Rec
  /**
   * Conditions on the record and its place alone (no reads) under which the stock drops it
   * outright: throw InvalidRecordError. Checked before anything is written, so such a record is
   * skipped and counted without disturbing its batch.
   */
  check?(ref: RecordRef, record: Rec): void
  /**
   * The primary row for this record. May read state (e.g. reply validation). Null keeps the
   * record in `record` only (the stock skips e.g. a profile whose rkey is not `self`); throwing
   * drops the whole record, `record` row included.
   */
  toRow(db: Reader, ref: RecordRef, record: Rec): Insertable<Tables[T]> | null
  /**
   * When the primary insert hits a uniqueness rule other than the uri (a second like of the same
   * subject), the uri of the record that holds the slot; it is then tracked as a duplicate.
   */
  findDuplicate?(db: Reader, ref: RecordRef, record: Rec): string | null
  /** Effects of a primary row that was actually inserted. */
  onInsert(db: Reader, row: Selectable<Tables[T]>, ref: RecordRef, record: Rec): Effects
  /**
   * Effects of a primary row that was actually deleted; `replacedBy` (and its record) is set on
   * updates and duplicate promotions, whose notifications come from here.
   */
  onDelete(
    db: Reader,
    row: Selectable<Tables[T]>,
    replacedBy: Selectable<Tables[T]> | null,
    replacedByRecord?: Rec,
  ): Effects
  /**
   * What the stock writes with every create / delete of the record whether or not the primary
   * row changed (a duplicate repost still gets a feed item, and loses it when deleted; deleting
   * a post never indexed still takes the quotes of it); kept out of onInsert / onDelete. The
   * delete side runs before onDelete is asked.
   */
  unconditional?: {
    create(ref: RecordRef, record: Rec): RowWrite[]
    delete(db: Reader, uri: string): Effects
  }
  /** On delete, re-index the oldest duplicate in its place (default true). */
  promoteDuplicateOnDelete?: boolean
  /**
   * The rows onDelete reads of the row at `uri` (its embeds, say). The writer reads them before it
   * knows whether that row exists, so the batch loads them with its first reads instead of in a
   * planning pass of their own.
   */
  readsOnDelete?(uri: string): { table: TableName; where: Partial<Record<string, string>> }[]
  /**
   * Rows a create of this record reads beyond its own (a reply's thread and gate, say), as far as
   * the record alone tells. The writer loads them with the batch's first reads, before it plans,
   * so the step runs once instead of missing them first.
   */
  readsOnCreate?(
    ref: RecordRef,
    record: Rec,
  ): { table: TableName; where: Partial<Record<string, string>> }[]
  /**
   * Rows onInsert inserts beyond the primary one, as far as the record alone tells (its feed
   * item, its embeds): values other than their keys may be left out. The writer reads their key
   * slots with the batch's first reads, as it reads the primary row's.
   */
  insertsOnCreate?(ref: RecordRef, record: Rec): RowInsert[]
}

// The rows a batch reads, loaded in bulk, with the batch's own changes laid over them. Planning a
// batch runs its ops in firehose order against this state, synchronously: a read of something
// not loaded yet throws `Miss` (the key is noted), the planner finishes the pass collecting every
// miss, loads them all with one query per table and lookup shape, and plans again from the start.
// Round trips then grow with how deep the batch's reads chain (a thread's ancestors), never with
// the number of events. At the end the state knows, per table and primary key, the row before the
// batch and after it: the writes to apply, each table once.
import { sql, type Kysely } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'

export type Value = string | number | boolean | null
export type Row = Record<string, unknown>
export type Where = Record<string, Value>

/** Primary key columns of every table a batch reads or writes. */
export const PRIMARY_KEYS: Record<string, readonly string[]> = {
  record: ['uri'],
  duplicate_record: ['uri'],
  actor: ['did'],
  actor_sync: ['did'],
  profile: ['uri'],
  post: ['uri'],
  post_embed_image: ['postUri', 'position'],
  post_embed_gallery_image: ['postUri', 'position'],
  post_embed_video: ['postUri'],
  post_embed_external: ['postUri'],
  post_embed_record: ['postUri'],
  quote: ['uri'],
  feed_item: ['uri'],
  op_thread_reply: ['uri'],
  like: ['uri'],
  repost: ['uri'],
  follow: ['uri'],
  actor_block: ['uri'],
  list: ['uri'],
  list_item: ['uri'],
  list_block: ['uri'],
  reference_list_opt_out: ['uri'],
  thread_gate: ['uri'],
  post_gate: ['uri'],
  feed_generator: ['uri'],
  labeler: ['uri'],
  starter_pack: ['uri'],
  verification: ['uri'],
  thread_mute: ['rootUri', 'mutedByDid'],
}

/** Thrown by a read of rows not loaded yet; the planner catches it, loads, and plans again. */
export class Miss extends Error {
  override name = 'Miss'
}

const SEP = '\u0001'
const keyOf = (values: readonly Value[]): string => values.map((v) => String(v)).join(SEP)

function primaryKey(table: string): readonly string[] {
  const pk = PRIMARY_KEYS[table]
  if (!pk) throw new Error(`no primary key known for table ${table}`)
  return pk
}

interface Lookup {
  table: string
  columns: string[]
}

export class BatchState {
  private readonly db: Kysely<DatabaseSchema>
  /** Rows as they were before the batch, by table and primary key; null: known absent. */
  private readonly base = new Map<string, Map<string, Row | null>>()
  /** Lookups by other columns already loaded: the primary keys of the rows they found. */
  private readonly lookups = new Map<string, string[]>()
  /** The batch's changes, by table and primary key; null: deleted. */
  private overlay = new Map<string, Map<string, Row | null>>()
  /** What the current pass could not read: lookup shape → value tuples. */
  private misses = new Map<string, { lookup: Lookup; values: Map<string, Value[]> }>()
  /** Queries issued by load(), for the profile. */
  queries = 0

  constructor(db: Kysely<DatabaseSchema>) {
    this.db = db
  }

  /** Starts a planning pass: the batch's changes so far are dropped, loaded rows kept. */
  reset(): void {
    this.overlay = new Map()
    this.misses = new Map()
  }

  get missed(): number {
    let n = 0
    for (const m of this.misses.values()) n += m.values.size
    return n
  }

  /** The rows of `table` matching `where` now (before the batch, changed by it). */
  rows(table: string, where: Where): Row[] {
    const columns = Object.keys(where).sort()
    const values = columns.map((c) => where[c]!)
    const pk = primaryKey(table)
    const byPk = columns.length === pk.length && pk.every((c) => c in where)
    const changed = this.overlay.get(table)
    if (byPk) {
      const key = keyOf(pk.map((c) => where[c]!))
      if (changed?.has(key)) {
        const row = changed.get(key)!
        return row ? [row] : []
      }
      const known = this.base.get(table)
      if (!known?.has(key))
        throw this.miss(
          { table, columns: [...pk] },
          pk.map((c) => where[c]!),
        )
      const row = known.get(key)!
      return row ? [row] : []
    }
    const lookupKey = `${table}${SEP}${columns.join(',')}${SEP}${keyOf(values)}`
    const found = this.lookups.get(lookupKey)
    if (!found) throw this.miss({ table, columns }, values)
    const out: Row[] = []
    const known = this.base.get(table)!
    for (const key of found) {
      if (changed?.has(key)) continue
      const row = known.get(key)
      if (row) out.push(row)
    }
    // Rows the batch wrote (or changed) that match now.
    for (const row of changed?.values() ?? []) {
      if (row && columns.every((c) => row[c] === where[c])) out.push(row)
    }
    return out
  }

  first(table: string, where: Where): Row | undefined {
    return this.rows(table, where)[0]
  }

  /**
   * Whether a row with this primary key exists now. Reading it first also makes it known, which
   * apply() needs for every key the batch writes.
   */
  has(table: string, key: Where): boolean {
    return this.rows(table, key).length > 0
  }

  /** Writes a row (replacing any with its key). */
  put(table: string, row: Row): void {
    const key = this.keyOfRow(table, row)
    // The row before the batch must be known, to tell an insert from a replacement.
    this.ensureKnown(table, row)
    this.changedTable(table).set(key, row)
  }

  /** Deletes the rows matching `where`; returns them. */
  delete(table: string, where: Where): Row[] {
    const gone = this.rows(table, where)
    for (const row of gone) this.changedTable(table).set(this.keyOfRow(table, row), null)
    return gone
  }

  /** Changes columns of the rows matching `where`; returns them as they are now. */
  update(table: string, where: Where, set: Row): Row[] {
    const rows = this.rows(table, where).map((row) => ({ ...row, ...set }))
    for (const row of rows) this.changedTable(table).set(this.keyOfRow(table, row), row)
    return rows
  }

  /** Loads everything the last pass missed: one query per table and lookup shape. */
  async load(): Promise<void> {
    const pending = [...this.misses.values()]
    this.misses = new Map()
    for (const { lookup, values } of pending) {
      const { table, columns } = lookup
      const tuples = [...values.values()]
      const pk = primaryKey(table)
      const arrays = columns.map((_, i) => tuples.map((t) => (t[i] === null ? null : String(t[i]))))
      // (c1, c2) in (select * from unnest($1::text[], $2::text[])): one statement for any count.
      // Compared as text: a relabel for the (var)char columns these lookups use, so their
      // indexes still serve.
      const cols = sql.join(columns.map((c) => sql`${sql.ref(c)}::text`))
      const unnest = sql.join(arrays.map((a) => sql`${a}::text[]`))
      const { rows } = await sql<Row>`
        select * from ${sql.table(table)}
        where (${cols}) in (select * from unnest(${unnest}))
      `.execute(this.db)
      this.queries++
      const known = this.knownTable(table)
      const byPk = columns.length === pk.length && pk.every((c, i) => columns[i] === c)
      if (byPk) for (const t of tuples) if (!known.has(keyOf(t))) known.set(keyOf(t), null)
      const matches = new Map<string, string[]>()
      for (const row of rows) {
        const key = keyOf(pk.map((c) => row[c] as Value))
        known.set(key, row)
        if (!byPk) {
          const lookupKey = `${table}${SEP}${columns.join(',')}${SEP}${keyOf(columns.map((c) => row[c] as Value))}`
          matches.set(lookupKey, [...(matches.get(lookupKey) ?? []), key])
        }
      }
      if (!byPk) {
        for (const t of tuples) {
          const lookupKey = `${table}${SEP}${columns.join(',')}${SEP}${keyOf(t)}`
          this.lookups.set(lookupKey, matches.get(lookupKey) ?? [])
        }
      }
    }
  }

  /**
   * The batch's net writes per table: rows to delete (by primary key) and rows to insert, from
   * comparing each changed key's row before the batch with its row now. An unchanged row (written
   * back as it was) is neither.
   */
  writes(): Map<string, { deleted: Row[]; inserted: Row[] }> {
    const out = new Map<string, { deleted: Row[]; inserted: Row[] }>()
    for (const [table, changed] of this.overlay) {
      const known = this.base.get(table)
      const deleted: Row[] = []
      const inserted: Row[] = []
      for (const [key, now] of changed) {
        const before = known?.get(key)
        if (before === undefined) throw new Error(`${table} ${key} written but never read`)
        if (before && now && sameRow(before, now)) continue
        if (before) deleted.push(before)
        if (now) inserted.push(now)
      }
      if (deleted.length || inserted.length) out.set(table, { deleted, inserted })
    }
    return out
  }

  private ensureKnown(table: string, row: Row): void {
    const pk = primaryKey(table)
    const key = keyOf(pk.map((c) => row[c] as Value))
    if (this.overlay.get(table)?.has(key) || this.base.get(table)?.has(key)) return
    throw this.miss(
      { table, columns: [...pk] },
      pk.map((c) => row[c] as Value),
    )
  }

  private keyOfRow(table: string, row: Row): string {
    return keyOf(primaryKey(table).map((c) => row[c] as Value))
  }

  private changedTable(table: string): Map<string, Row | null> {
    let m = this.overlay.get(table)
    if (!m) this.overlay.set(table, (m = new Map()))
    return m
  }

  private knownTable(table: string): Map<string, Row | null> {
    let m = this.base.get(table)
    if (!m) this.base.set(table, (m = new Map()))
    return m
  }

  private miss(lookup: Lookup, values: Value[]): Miss {
    const shape = `${lookup.table}${SEP}${lookup.columns.join(',')}`
    let m = this.misses.get(shape)
    if (!m) this.misses.set(shape, (m = { lookup, values: new Map() }))
    m.values.set(keyOf(values), values)
    return new Miss(`${lookup.table} by ${lookup.columns.join(', ')} not loaded`)
  }
}

/** Rows compare by the columns the newer one has (planned rows leave generated columns out). */
function sameRow(before: Row, now: Row): boolean {
  for (const [c, v] of Object.entries(now)) {
    const b = before[c]
    if (b === v) continue
    if (b == null && v == null) continue
    if (String(b) !== String(v)) return false
  }
  return true
}

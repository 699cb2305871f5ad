// The rows a batch reads, loaded in bulk, with the batch's own changes laid over them. Planning
// runs the batch's steps in firehose order against this state, synchronously. A read of something
// not loaded yet answers "nothing" and notes the key; the planner sees the step missed, undoes it,
// lets the rest of the pass note what it misses too, loads every noted key with one query per
// table and lookup shape, and resumes at the first step that missed (the steps before it read only
// loaded rows, so their outcome stands). Round trips then grow with how deep the batch's reads
// chain (a thread's ancestors), never with the number of events. At the end the state knows, per
// table and primary key, the row before the batch and after it: the writes to apply, each table
// once. Each table's maps are one object (table-state.ts); this class keeps the journal that
// undoes the batch's changes across tables, and the loads.
import type { Kysely } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'
import type { Absent } from './absent.ts'
import type { CommittedRows, PlannedPart } from './committed-rows.ts'
import { DEPTH, loadQuery } from './load-query.ts'
import { differs, keyOf, primaryKeyOf, type Row, type Value, type Where } from './rows.ts'
import type { SchemaInfo } from './schema.ts'
import { TableState, type Misses, type Shape } from './table-state.ts'

export { sameValue, type Row, type Value, type Where } from './rows.ts'

/**
 * A batch's net writes per table: rows it removed, rows it added, and rows whose key it kept
 * but whose columns it changed (before, after).
 */
export interface TableWrites {
  deleted: Row[]
  inserted: Row[]
  replaced: [Row, Row][]
}
export type Writes = Map<string, TableWrites>

/**
 * The answer of a read that found nothing: one shared array, frozen so a caller that tried to add
 * to it would fail loudly. Most reads of a batch of new records find nothing.
 */
const NONE: Row[] = Object.freeze([]) as unknown as Row[]

/** One overlay change, to undo it. */
interface Undo {
  table: TableState
  key: string
  /** The overlay entry before, or undefined when there was none. */
  prev: Row | null | undefined
}

export class BatchState {
  private readonly db: Kysely<DatabaseSchema>
  private readonly schema: SchemaInfo
  private readonly tables = new Map<string, TableState>()
  /** Tables in the order their rows before the batch were first known, and first changed. */
  private readonly baseOrder: TableState[] = []
  private readonly overlayOrder: TableState[] = []
  private readonly journal: Undo[] = []
  /** What could not be read yet, this round: one entry per lookup shape. */
  private misses: Misses[] = []
  /** Planning rounds so far: a round ends with a load (Misses.round). */
  private round = 0
  /** Reads that missed so far (a step compares it before and after). */
  missCount = 0
  /** Queries issued by load(), and the seconds they took, for the profile. */
  queries = 0
  loadSeconds = 0

  /**
   * The batch applied just before this one, whose changes may not be committed yet when this one
   * is planned (the pipeline plans a batch while the previous one is written): its changes are
   * read through, above whatever this state loads from the database, which may be from before
   * or after that commit. Only its changes are read, never its loaded rows, so layers never
   * chain further back.
   */
  private below: BatchState | undefined
  /** Rows known absent from the database before the batch, which no read needs to ask for. */
  private readonly absent: Absent | undefined
  /** Rows as the writer's committed batches left them, taken as read (committed-rows.ts). */
  private readonly committed: CommittedRows | undefined

  constructor(
    db: Kysely<DatabaseSchema>,
    schema: SchemaInfo,
    below?: BatchState,
    absent?: Absent,
    committed?: CommittedRows,
  ) {
    this.db = db
    this.schema = schema
    this.below = below
    this.absent = absent
    this.committed = committed
  }

  /** Whether keys wait to be loaded. */
  get pending(): boolean {
    return this.misses.length > 0
  }

  /** A point to roll the batch's changes back to. */
  mark(): number {
    return this.journal.length
  }

  rollback(mark: number): void {
    while (this.journal.length > mark) {
      const u = this.journal.pop()!
      u.table.setOverlay(u.key, u.prev)
    }
  }

  /** The rows of `table` matching `where` now (before the batch, changed by it). */
  rows(table: string, where: Where): Row[] {
    const ts = this.table(table)
    // The most common read: one row by a one-column primary key (a uri, a did).
    if (byOnlyKey(ts.pk, where)) {
      const row = this.oneByKey(ts, where[ts.pk[0]!]!, false)
      return row ? [row] : NONE
    }
    return this.rowsOf(ts, where)
  }

  /** The first row of `table` matching `where` now; by primary key, without an array. */
  first(table: string, where: Where): Row | undefined {
    const ts = this.table(table)
    if (byOnlyKey(ts.pk, where)) return this.oneByKey(ts, where[ts.pk[0]!]!, false)
    return this.rowsOf(ts, where)[0]
  }

  /** Reads what `rows` would, for what it misses (a hint before planning): answers nothing. */
  note(table: string, where: Where): void {
    this.first(table, where)
  }

  private rowsOf(ts: TableState, where: Where): Row[] {
    const table = ts.name
    const shape = ts.shapeOf(where)
    const { columns } = shape
    const values = columns.map((c) => where[c]!)
    if (shape.primary) return this.byKey(ts, values)
    const changed = ts.overlay
    const under = ts.under?.overlay
    const match = keyOf(values)
    let found = shape.found.get(match)
    if (!found) {
      if (!this.absent?.has(table, columns, values)) return this.miss(ts, shape, false, values)
      shape.found.set(match, (found = []))
    }
    if (!found.length && !changed.size && !under?.size) return NONE
    const out: Row[] = []
    for (const key of found) {
      if (changed.has(key) || under?.has(key)) continue
      const row = ts.base.get(key)
      if (row) out.push(row)
    }
    // Rows the batch below wrote (or changed) that match now, unless this batch changed them.
    if (under?.size) {
      for (const key of ts.under!.index(ts.underShape(shape)!).get(match) ?? []) {
        const row = under.get(key)
        if (row && !changed.has(key)) out.push(row)
      }
    }
    // Rows this batch wrote (or changed) that match now.
    if (changed.size) {
      for (const key of ts.index(shape).get(match) ?? []) {
        const row = changed.get(key)
        if (row) out.push(row)
      }
    }
    return out
  }

  /** The row with this primary key now, if any (a miss if not known yet). */
  private byKey(ts: TableState, pkValues: Value[], alone = false): Row[] {
    const key = keyOf(pkValues)
    const row = ts.rowAt(key)
    if (row !== undefined) return row ? [row] : NONE
    return this.unknownKey(ts, key, pkValues, alone)
  }

  /** The row with this one-column primary key now, without an array unless it must be loaded. */
  private oneByKey(ts: TableState, value: Value, alone: boolean): Row | undefined {
    const key = String(value)
    const row = ts.rowAt(key)
    if (row !== undefined) return row ?? undefined
    return this.unknownKey(ts, key, [value], alone)[0]
  }

  /** A key no layer knows yet: known absent (nothing), or a miss to load. */
  private unknownKey(ts: TableState, key: string, pkValues: Value[], alone: boolean): Row[] {
    const kept = this.fromCommitted(ts, key)
    if (kept !== undefined) return kept ? [kept] : NONE
    if (this.knownAbsent(ts, pkValues, key)) return NONE
    return this.miss(ts, ts.primaryShape, alone, pkValues)
  }

  /**
   * The row with this one-column primary key now, for a reader that never walks up from it: if
   * it must be loaded, the rows above it (CHAINS) are not loaded with it.
   */
  alone(table: string, key: Value): Row | undefined {
    return this.oneByKey(this.table(table), key, true)
  }

  has(table: string, key: Where): boolean {
    return this.first(table, key) !== undefined
  }

  /**
   * Writes a row (replacing any with its key), its generated columns computed as Postgres would.
   * Returns the row as written.
   */
  put(table: string, values: Row): Row {
    const ts = this.table(table)
    const pk = ts.pk
    const key = primaryKeyOf(pk, values)
    // The row before the batch must be known, to tell an insert from a replacement.
    if (ts.rowAt(key) === undefined && this.fromCommitted(ts, key) === undefined) {
      const pkValues = pk.map((c) => values[c] as Value)
      if (!this.knownAbsent(ts, pkValues, key)) this.miss(ts, ts.primaryShape, false, pkValues)
    }
    return this.write(ts, values, key)
  }

  /**
   * put's write at primary key `key` (of `values`: the generated columns are never key
   * columns), once the key's row before the batch is known (or missed).
   */
  private write(ts: TableState, values: Row, key: string): Row {
    const row = { ...values }
    for (const column in row) {
      const v = row[column]
      // Postgres refuses NUL in text and json: refuse it here, where only its record fails.
      if (typeof v === 'string' && v.includes('\u0000')) {
        throw new Error(`${ts.name}.${column} holds a NUL character, which Postgres refuses`)
      }
    }
    for (const [column, [a, b]] of ts.info.generated) {
      const x = String(row[a])
      const y = String(row[b])
      row[column] = x < y ? x : y
    }
    this.change(ts, key, row)
    return row
  }

  /**
   * Inserts a row unless its primary key or another unique key is taken (what `on conflict do
   * nothing` does); returns the row written, or null.
   */
  insertIfFree(table: string, values: Row): Row | null {
    const ts = this.table(table)
    const pk = ts.pk
    const taken =
      pk.length === 1
        ? this.oneByKey(ts, (values[pk[0]!] ?? null) as Value, false)
        : this.first(table, pick(values, pk))
    if (taken) return null
    for (const unique of ts.info.unique) {
      // A null never conflicts.
      if (unique.some((c) => values[c] == null)) continue
      if (this.first(table, pick(values, unique))) return null
    }
    // The key was just read: known now (the put needs no check of its own), or missed, which
    // undoes the step anyway.
    return this.write(ts, values, primaryKeyOf(pk, values))
  }

  /** Reads what insertIfFree would read to insert `values`, writing nothing (a hint). */
  readSlots(table: string, values: Row): void {
    const ts = this.table(table)
    this.note(table, pick(values, ts.pk))
    for (const unique of ts.info.unique) {
      const where = pick(values, unique)
      if (!Object.values(where).some((v) => v === null)) this.note(table, where)
    }
  }

  /** Deletes the rows matching `where`; returns them. */
  delete(table: string, where: Where): Row[] {
    const ts = this.table(table)
    const gone = this.rows(table, where)
    for (const row of gone) this.change(ts, primaryKeyOf(ts.pk, row), null)
    return gone
  }

  /** Changes columns of the rows matching `where`; returns them as they are now. */
  update(table: string, where: Where, set: Row): Row[] {
    const ts = this.table(table)
    const rows = this.rows(table, where).map((row) => ({ ...row, ...set }))
    for (const row of rows) this.change(ts, primaryKeyOf(ts.pk, row), row)
    return rows
  }

  /** Loads everything missed so far: one query per table and lookup shape, all at once. */
  async load(): Promise<void> {
    const started = performance.now()
    try {
      await this.loadMisses()
    } finally {
      this.loadSeconds += (performance.now() - started) / 1000
    }
  }

  private async loadMisses(): Promise<void> {
    const pending = this.misses
    this.misses = []
    this.round++
    const reads = pending.map(({ table: ts, shape, alone, values }) => {
      const tuples = [...values.values()]
      return { ts, shape, tuples, ...loadQuery(ts.name, ts.info, shape.columns, tuples, alone) }
    })
    // Outside a transaction (planning on the pool) the reads go at once, each on a connection
    // of its own: their round trips overlap. A transaction's connection takes them in turn.
    const results = this.db.isTransaction
      ? await sequentially(reads.map((r) => () => r.query.execute(this.db)))
      : await Promise.all(reads.map((r) => r.query.execute(this.db)))
    for (const [i, { ts, shape, tuples, chain, byPk }] of reads.entries()) {
      const { rows } = results[i]!
      this.queries++
      const pk = ts.pk
      const columns = shape.columns
      const known = this.knownTable(ts)
      const matches = new Map<string, string[]>()
      const links: unknown[] = []
      for (const row of rows) {
        if (DEPTH in row) {
          // Below the depth bound, the query followed this row's link: no row means none exists.
          if (chain && Number(row[DEPTH]) < chain.depth && row[chain.column] != null) {
            links.push(row[chain.column])
          }
          delete row[DEPTH]
        }
        const key = primaryKeyOf(pk, row)
        // A key known already keeps the row first read: reads of one batch must agree.
        if (!known.has(key)) known.set(key, row)
        if (!byPk) {
          const match = keyOf(columns.map((c) => row[c]))
          const keys = matches.get(match)
          if (keys) keys.push(key)
          else matches.set(match, [key])
        }
      }
      for (const link of links) if (!known.has(keyOf([link]))) known.set(keyOf([link]), null)
      for (const v of tuples) {
        if (byPk) {
          if (!known.has(keyOf(v))) known.set(keyOf(v), null)
        } else {
          const match = keyOf(v)
          shape.found.set(match, matches.get(match) ?? [])
        }
      }
    }
  }

  /**
   * The batch's net writes per table, from comparing each changed key's row before the batch
   * with its row now: removed, added, or replaced in place. A row written back as it was is none.
   */
  writes(): Writes {
    const out: Writes = new Map()
    for (const ts of this.overlayOrder) {
      const deleted: Row[] = []
      const inserted: Row[] = []
      const replaced: [Row, Row][] = []
      for (const [key, now] of ts.overlay) {
        const before = ts.before(key)
        if (before === undefined) throw new Error(`${ts.name} ${key} written but never read`)
        if (before && now) {
          if (differs(before, now)) replaced.push([before, now])
        } else if (before) deleted.push(before)
        else if (now) inserted.push(now)
      }
      if (deleted.length || inserted.length || replaced.length) {
        out.set(ts.name, { deleted, inserted, replaced })
      }
    }
    return out
  }

  /**
   * The batch's changes to `tables`, row by row in the order it made them (a row inserted and
   * deleted again in the batch shows both): what the stores that follow these tables replay, as
   * if the statements had run one by one.
   */
  history(tables: ReadonlySet<string>): { table: string; before: Row | null; after: Row | null }[] {
    // The value after each journal entry is the next entry's `prev` for that key, or, for the
    // last one, the overlay's value now.
    const entries = this.journal.filter((u) => tables.has(u.table.name))
    const out: { table: string; before: Row | null; after: Row | null }[] = []
    const nextOf = new Map<number, number>()
    const seen = new Map<TableState, Map<string, number>>()
    entries.forEach((u, i) => {
      let keys = seen.get(u.table)
      if (!keys) seen.set(u.table, (keys = new Map()))
      const prevIndex = keys.get(u.key)
      if (prevIndex !== undefined) nextOf.set(prevIndex, i)
      keys.set(u.key, i)
    })
    entries.forEach((u, i) => {
      const before = u.prev !== undefined ? u.prev : (u.table.before(u.key) ?? null)
      const next = nextOf.get(i)
      const after =
        next !== undefined ? (entries[next]!.prev ?? null) : (u.table.overlay.get(u.key) ?? null)
      if (before === after) return
      if (before && after && !differs(before, after)) return
      out.push({ table: u.table.name, before, after })
    })
    return out
  }

  /** The rows of `table` this batch changed, by primary key, as it leaves them (null: deleted). */
  changedRows(table: string): ReadonlyMap<string, Row | null> {
    return this.tables.get(table)?.overlay ?? new Map()
  }

  /**
   * The kept tables' rows (committed-rows.ts) as this batch leaves them once it commits: each key
   * it changed, and each it read that the batch below did not change (a row read before that
   * batch committed may predate it). Taken before `detach`.
   */
  committedRows(): PlannedPart {
    const rows: { table: string; key: string; row: Row | null }[] = []
    const kept = this.committed
    if (!kept) return { rows }
    for (const ts of this.baseOrder) {
      if (!kept.keeps(ts.name)) continue
      const changed = ts.overlay
      const under = ts.under?.overlay
      for (const [key, row] of ts.base) {
        if (!changed.has(key) && !under?.has(key)) rows.push({ table: ts.name, key, row })
      }
    }
    for (const ts of this.overlayOrder) {
      if (!kept.keeps(ts.name)) continue
      for (const [key, row] of ts.overlay) rows.push({ table: ts.name, key, row })
    }
    return { rows }
  }

  /**
   * Forgets the batch below once this batch's writes are known: the batch planned on this one
   * reads only this one's changes, so states never hold a chain of earlier batches.
   */
  detach(): void {
    this.below = undefined
    for (const ts of this.tables.values()) ts.under = undefined
  }

  /** The table's state in this batch, made on its first read (with the batch below's). */
  private table(table: string): TableState {
    let ts = this.tables.get(table)
    if (!ts) {
      const info = this.schema.get(table)
      if (!info?.primary.length) throw new Error(`no primary key known for table ${table}`)
      // The batch below is planned in full before this one starts: its state for the table,
      // made now if it never read it, is the one any change of it is in.
      ts = new TableState(table, info, this.below?.table(table))
      this.tables.set(table, ts)
    }
    return ts
  }

  /** Changes the overlay at `key`, journaled so that a rollback undoes it. */
  private change(ts: TableState, key: string, row: Row | null): void {
    if (!ts.listedOverlay) {
      ts.listedOverlay = true
      this.overlayOrder.push(ts)
    }
    this.journal.push({ table: ts, key, prev: ts.setOverlay(key, row) })
  }

  private knownTable(ts: TableState): Map<string, Row | null> {
    if (!ts.listedBase) {
      ts.listedBase = true
      this.baseOrder.push(ts)
    }
    return ts.base
  }

  /** The committed row at a key no layer knows yet (null: none), recorded as read; or undefined. */
  private fromCommitted(ts: TableState, key: string): Row | null | undefined {
    const row = this.committed?.get(ts.name, key)
    if (row !== undefined) this.knownTable(ts).set(key, row)
    return row
  }

  /** Whether the key is known absent before the batch; if so it is recorded as read. */
  private knownAbsent(ts: TableState, values: unknown[], key: string) {
    if (!this.absent?.has(ts.name, ts.pk, values)) return false
    this.knownTable(ts).set(key, null)
    return true
  }

  /** Notes values of a shape to load with this round's misses; the read finds nothing for now. */
  private miss(ts: TableState, shape: Shape, alone: boolean, values: Value[]): Row[] {
    this.missCount++
    let misses = alone ? shape.aloneMisses : shape.misses
    if (misses?.round !== this.round) {
      misses = { table: ts, shape, alone, values: new Map(), round: this.round }
      if (alone) shape.aloneMisses = misses
      else shape.misses = misses
      this.misses.push(misses)
    }
    misses.values.set(keyOf(values), values)
    return NONE
  }
}

/** Whether `where` names the one column of a one-column primary key, and nothing else. */
function byOnlyKey(pk: readonly string[], where: Where): boolean {
  if (pk.length !== 1) return false
  let n = 0
  for (const _ in where) if (++n > 1) return false
  return pk[0]! in where
}

function pick(row: Row, columns: readonly string[]): Where {
  const where: Where = {}
  for (const c of columns) where[c] = (row[c] ?? null) as Value
  return where
}

async function sequentially<T>(runs: (() => Promise<T>)[]): Promise<T[]> {
  const out: T[] = []
  for (const run of runs) out.push(await run())
  return out
}

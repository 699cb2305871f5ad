// The rows a batch reads, loaded in bulk, with the batch's own changes laid over them. Planning
// runs the batch's steps in firehose order against this state, synchronously. A read of something
// not loaded yet answers "nothing" and notes the key; the planner sees the step missed, undoes it,
// lets the rest of the pass note what it misses too, loads every noted key with one query per
// table and lookup shape, and resumes at the first step that missed (the steps before it read only
// loaded rows, so their outcome stands). Round trips then grow with how deep the batch's reads
// chain (a thread's ancestors), never with the number of events. At the end the state knows, per
// table and primary key, the row before the batch and after it: the writes to apply, each table
// once. One class at this length because its maps (rows read, the batch's changes, their journal
// and lookup indexes) change together on every read and write.
import { sql, type Kysely } from 'kysely'
import { textArray, type DatabaseSchema } from '@openplane/db'
import type { Absent } from './absent.ts'
import type { CommittedRows, PlannedPart } from './committed-rows.ts'
import type { SchemaInfo, TableInfo } from './schema.ts'

export type Value = string | number | boolean | null
export type Row = Record<string, unknown>
export type Where = Record<string, Value>
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

const SEP = '\u0001'
/**
 * The answer of a read that found nothing: one shared array, frozen so a caller that tried to add
 * to it would fail loudly. Most reads of a batch of new records find nothing.
 */
const NONE: Row[] = Object.freeze([]) as unknown as Row[]

/**
 * Rows that point to others a plan walks one by one (a reply to its parent, up a thread): loading
 * such a row by key loads the chain above it too, to this depth, in the same query, so a thread
 * walk costs one pass instead of one per level. A link the query found no row for (a deleted
 * parent) is known absent from then on, so the walk stops there without a pass of its own.
 */
const CHAINS: Record<string, { column: string; depth: number }> = {
  post: { column: 'replyParent', depth: 6 },
}
/** The column a chain load adds to each row: how far above a requested row it was found. */
const DEPTH = '__chainDepth'
/** A key of column values; one value is its own key (most reads are by one column). */
const keyOf = (values: readonly unknown[]): string => {
  if (values.length === 1) return String(values[0])
  let key = String(values[0])
  for (let i = 1; i < values.length; i++) key += SEP + String(values[i])
  return key
}

/** A row's primary key (`pk` its columns), without an array for a one-column key. */
const primaryKeyOf = (pk: readonly string[], row: Row): string =>
  pk.length === 1 ? String(row[pk[0]!]) : keyOf(pk.map((c) => row[c]))

/** The overlay's rows by the values of one lookup shape's columns. */
interface ShapeIndex {
  columns: string[]
  index: Map<string, Set<string>>
}

interface Shape {
  columns: string[]
  /** The columns joined: the shape's part of a lookup's key. */
  name: string
  /** Whether the columns are the primary key (then in its order). */
  primary: boolean
  /** This shape's loaded lookups (BatchState.lookups), once one was read. */
  found?: Map<string, string[]>
}

/** One step of the path to a read's shape: the table, then each column name in turn. */
interface ShapeNode {
  next: Map<string, ShapeNode>
  shape?: Shape
}

interface Lookup {
  table: string
  columns: string[]
  /** A primary-key read that never walks up: loaded without the chain above (CHAINS). */
  alone?: boolean
}

/** One overlay change, to undo it. */
interface Undo {
  table: string
  key: string
  /** The overlay entry before, or undefined when there was none. */
  prev: Row | null | undefined
}

export class BatchState {
  private readonly db: Kysely<DatabaseSchema>
  private readonly schema: SchemaInfo
  /** Rows as they were before the batch, by table and primary key; null: known absent. */
  private readonly base = new Map<string, Map<string, Row | null>>()
  /**
   * Lookups by other columns already loaded, by table and shape (`table SEP columns`), then by
   * the values' key: the primary keys of the rows they found.
   */
  private readonly lookups = new Map<string, Map<string, string[]>>()
  /** The batch's changes, by table and primary key; null: deleted. */
  private readonly overlay = new Map<string, Map<string, Row | null>>()
  /** Overlay rows by lookup shape and values, built when a shape is first read. */
  private readonly indexes = new Map<string, Map<string, ShapeIndex>>()
  private readonly journal: Undo[] = []
  /** Read shapes by table, then column by column in the order written (shapeOf). */
  private readonly shapes = new Map<string, ShapeNode>()
  /** What could not be read yet: lookup shape → value tuples. */
  private misses = new Map<string, { lookup: Lookup; values: Map<string, unknown[]> }>()
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
    return this.misses.size > 0
  }

  /** A point to roll the batch's changes back to. */
  mark(): number {
    return this.journal.length
  }

  rollback(mark: number): void {
    while (this.journal.length > mark) {
      const u = this.journal.pop()!
      this.setOverlay(u.table, u.key, u.prev, false)
    }
  }

  /** The rows of `table` matching `where` now (before the batch, changed by it). */
  rows(table: string, where: Where): Row[] {
    const t = this.table(table)
    const pk = t.primary
    // The most common read: one row by a one-column primary key (a uri, a did).
    if (pk.length === 1) {
      const c = pk[0]!
      let n = 0
      for (const _ in where) n++
      if (n === 1 && c in where) return this.byOneKey(table, pk, where[c]!, false)
    }
    const shape = this.shapeOf(t, table, where)
    const { columns } = shape
    const values = columns.map((c) => where[c]!)
    if (shape.primary) return this.byKey(table, pk, values)
    const changed = this.overlay.get(table)
    const under = this.below?.overlay.get(table)
    const match = keyOf(values)
    const byMatch = (shape.found ??= this.lookupsOf(table, shape.name))
    let found = byMatch.get(match)
    if (!found) {
      if (!this.absent?.has(table, columns, values)) return this.miss({ table, columns }, values)
      byMatch.set(match, (found = []))
    }
    if (!found.length && !changed && !under) return NONE
    const out: Row[] = []
    const known = this.base.get(table)!
    for (const key of found) {
      if (changed?.has(key) || under?.has(key)) continue
      const row = known.get(key)
      if (row) out.push(row)
    }
    // Rows the batch below wrote (or changed) that match now, unless this batch changed them.
    if (under) {
      for (const key of this.below!.index(table, columns, shape.name).get(match) ?? []) {
        const row = under.get(key)
        if (row && !changed?.has(key)) out.push(row)
      }
    }
    // Rows this batch wrote (or changed) that match now.
    for (const key of this.index(table, columns, shape.name).get(match) ?? []) {
      const row = changed!.get(key)
      if (row) out.push(row)
    }
    return out
  }

  /**
   * A read's lookup shape: its columns in one order (sorted; the primary key's own order when
   * they are the primary key). Kept per table and column order as written, since reads come in a
   * few shapes a batch repeats thousands of times.
   */
  private shapeOf(t: TableInfo, table: string, where: Where): Shape {
    // Walked by name, not by a joined id: building that string was most of what a read allocated.
    let node = this.shapes.get(table)
    if (!node) this.shapes.set(table, (node = { next: new Map() }))
    for (const c in where) {
      let next: ShapeNode | undefined = node.next.get(c)
      if (!next) node.next.set(c, (next = { next: new Map() }))
      node = next
    }
    let shape = node.shape
    if (!shape) {
      const columns = Object.keys(where).sort()
      const primary = columns.length === t.primary.length && t.primary.every((c) => c in where)
      shape = primary
        ? { columns: [...t.primary], name: t.primary.join(','), primary }
        : { columns, name: columns.join(','), primary }
      node.shape = shape
    }
    return shape
  }

  /** The loaded lookups of one table and shape, by the values' key. */
  private lookupsOf(table: string, shape: string): Map<string, string[]> {
    const id = `${table}${SEP}${shape}`
    let m = this.lookups.get(id)
    if (!m) this.lookups.set(id, (m = new Map()))
    return m
  }

  /** The row with this primary key now, if any (a miss if not known yet). */
  private byKey(table: string, pk: readonly string[], pkValues: Value[], alone = false): Row[] {
    const key = keyOf(pkValues)
    const row = this.rowAt(table, key)
    if (row !== undefined) return row ? [row] : NONE
    return this.unknownKey(table, pk, key, pkValues, alone)
  }

  /** byKey for a one-column key, without an array of values unless it must be loaded. */
  private byOneKey(table: string, pk: readonly string[], value: Value, alone: boolean): Row[] {
    const key = String(value)
    const row = this.rowAt(table, key)
    if (row !== undefined) return row ? [row] : NONE
    return this.unknownKey(table, pk, key, [value], alone)
  }

  /** The row at this key now (null: none), or undefined when it is not known yet. */
  private rowAt(table: string, key: string): Row | null | undefined {
    // An overlay holds a row or null (deleted), never undefined (setOverlay removes the key):
    // `get` alone tells a key it holds from one it does not.
    const row = this.overlay.get(table)?.get(key)
    if (row !== undefined) return row
    const under = this.below?.overlay.get(table)?.get(key)
    if (under !== undefined) return under
    return this.base.get(table)?.get(key)
  }

  /** A key no layer knows yet: known absent (nothing), or a miss to load. */
  private unknownKey(
    table: string,
    pk: readonly string[],
    key: string,
    pkValues: Value[],
    alone: boolean,
  ): Row[] {
    const kept = this.fromCommitted(table, key)
    if (kept !== undefined) return kept ? [kept] : NONE
    if (this.knownAbsent(table, pk, pkValues, key)) return NONE
    return this.miss({ table, columns: [...pk], ...(alone && { alone }) }, pkValues)
  }

  first(table: string, where: Where): Row | undefined {
    return this.rows(table, where)[0]
  }

  /**
   * The row with this one-column primary key now, for a reader that never walks up from it: if
   * it must be loaded, the rows above it (CHAINS) are not loaded with it.
   */
  alone(table: string, key: Value): Row | undefined {
    return this.byOneKey(table, this.table(table).primary, key, true)[0]
  }

  has(table: string, key: Where): boolean {
    return this.rows(table, key).length > 0
  }

  /**
   * Writes a row (replacing any with its key), its generated columns computed as Postgres would.
   * Returns the row as written.
   */
  put(table: string, values: Row): Row {
    const t = this.table(table)
    const pk = t.primary
    const key = primaryKeyOf(pk, values)
    // The row before the batch must be known, to tell an insert from a replacement.
    if (this.rowAt(table, key) === undefined && this.fromCommitted(table, key) === undefined) {
      const pkValues = pk.map((c) => values[c] as Value)
      if (!this.knownAbsent(table, pk, pkValues, key))
        this.miss({ table, columns: [...pk] }, pkValues)
    }
    return this.write(table, t, values, key)
  }

  /**
   * put's write at primary key `key` (of `values`: the generated columns are never key
   * columns), once the key's row before the batch is known (or missed).
   */
  private write(table: string, t: TableInfo, values: Row, key: string): Row {
    const row = { ...values }
    for (const column in row) {
      const v = row[column]
      // Postgres refuses NUL in text and json: refuse it here, where only its record fails.
      if (typeof v === 'string' && v.includes('\u0000')) {
        throw new Error(`${table}.${column} holds a NUL character, which Postgres refuses`)
      }
    }
    for (const [column, [a, b]] of t.generated) {
      const x = String(row[a])
      const y = String(row[b])
      row[column] = x < y ? x : y
    }
    this.setOverlay(table, key, row, true)
    return row
  }

  /**
   * Inserts a row unless its primary key or another unique key is taken (what `on conflict do
   * nothing` does); returns the row written, or null.
   */
  insertIfFree(table: string, values: Row): Row | null {
    const t = this.table(table)
    const pk = t.primary
    const taken =
      pk.length === 1
        ? this.byOneKey(table, pk, (values[pk[0]!] ?? null) as Value, false)
        : this.rows(table, pick(values, pk))
    if (taken.length) return null
    for (const unique of t.unique) {
      // A null never conflicts.
      if (unique.some((c) => values[c] == null)) continue
      if (this.first(table, pick(values, unique))) return null
    }
    // The key was just read: known now (the put needs no check of its own), or missed, which
    // undoes the step anyway.
    const key = primaryKeyOf(pk, values)
    return this.write(table, t, values, key)
  }

  /** Reads what insertIfFree would read to insert `values`, writing nothing (a hint). */
  readSlots(table: string, values: Row): void {
    const t = this.table(table)
    this.rows(table, pick(values, t.primary))
    for (const unique of t.unique) {
      const where = pick(values, unique)
      if (!Object.values(where).some((v) => v === null)) this.rows(table, where)
    }
  }

  /** Deletes the rows matching `where`; returns them. */
  delete(table: string, where: Where): Row[] {
    const gone = this.rows(table, where)
    for (const row of gone) this.setOverlay(table, this.keyOfRow(table, row), null, true)
    return gone
  }

  /** Changes columns of the rows matching `where`; returns them as they are now. */
  update(table: string, where: Where, set: Row): Row[] {
    const rows = this.rows(table, where).map((row) => ({ ...row, ...set }))
    for (const row of rows) this.setOverlay(table, this.keyOfRow(table, row), row, true)
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
    const pending = [...this.misses.values()]
    this.misses = new Map()
    const reads = pending.map(({ lookup, values }) => {
      const { table, columns, alone } = lookup
      const t = this.table(table)
      const tuples = [...values.values()]
      const pk = t.primary
      const arrays = columns.map((_, i) => tuples.map((v) => (v[i] == null ? null : String(v[i]))))
      // (c1, c2) in (select * from unnest($1::text[], $2::text[])): one statement for any count.
      // Compared as text: a relabel for the (var)char columns these lookups use, so their
      // indexes still serve.
      const cols = sql.join(columns.map((c) => sql`${sql.ref(c)}::text`))
      const unnest = sql.join(arrays.map((a) => sql`${textArray(a)}::text[]`))
      const select = sql.join(
        t.columns.map((c) =>
          t.json.has(c) ? sql`${sql.ref(c)}::text as ${sql.ref(c)}` : sql.ref(c),
        ),
      )
      const chain = alone ? undefined : CHAINS[table]
      const byPk = columns.length === pk.length && pk.every((c, i) => columns[i] === c)
      // A unique column besides the key (actor.handle) is probed one value at a time through
      // its btree, as a range: as an equality, Postgres may take the stock's trigram index on
      // the same column instead, which answers it in milliseconds rather than microseconds, and
      // slower as the table grows (about 2 ms a probe at 100,000 actors, 9.75 ms a call in the
      // soak of bench:faults; as a range, 500 probes in 9 ms).
      const uniqueAlone =
        !byPk && columns.length === 1 && t.unique.some((u) => u.length === 1 && u[0] === columns[0])
      // A lookup by columns that are no unique key (replies by `replyParent`, feed items by
      // `postUri`) is probed value by value through a lateral subquery the planner cannot flatten
      // (`offset 0`). As a semi-join, Postgres, counting on ten values and many rows a value of a
      // column mostly null or repeated, hash-joins them against a sequential scan of the whole
      // table: measured 35 ms a batch at 15,000 posts, growing with the table, where the index
      // answers 300 values in 3 ms.
      //
      // So is a one-column primary key not loaded as a chain (actors by DID, records, follows
      // and reposts by URI): as a semi-join on a table Postgres has no statistics for yet (a new
      // fork's, growing faster than autovacuum analyzes it, or none at all), it too was hashed
      // against a sequential scan, up to 27 ms a read of `actor` at the 500k corpus.
      const probeEach =
        (!byPk &&
          !uniqueAlone &&
          !t.unique.some(
            (u) => u.length === columns.length && u.every((c) => columns.includes(c)),
          )) ||
        (byPk && pk.length === 1 && !chain)
      const vars = columns.map((_, i) => sql.raw(`v${i}`))
      // A chain load carries whole rows through the recursion, each level one probe of the
      // primary key per row: joining the reached keys back to the table afterwards lets the
      // planner, which cannot estimate the recursion, hash-join it against a scan of the whole
      // table.
      const selectFrom = (alias: string) =>
        sql.join(
          t.columns.map((c) =>
            t.json.has(c)
              ? sql`${sql.ref(`${alias}.${c}`)}::text as ${sql.ref(c)}`
              : sql`${sql.ref(`${alias}.${c}`)}`,
          ),
        )
      const query =
        chain && byPk && pk.length === 1
          ? sql<Row>`
          with recursive chain as (
            select ${selectFrom('s')}, 0 as ${sql.ref(DEPTH)} from ${sql.table(table)} s
            where (${cols}) in (select * from unnest(${unnest}))
            union all
            select ${selectFrom('t')}, c.${sql.ref(DEPTH)} + 1
            from chain c join ${sql.table(table)} t on t.${sql.ref(pk[0]!)} = c.${sql.ref(chain.column)}
            where c.${sql.ref(DEPTH)} < ${chain.depth}
          )
          select distinct on (${sql.ref(pk[0]!)}) * from chain
          order by ${sql.ref(pk[0]!)}, ${sql.ref(DEPTH)}`
          : uniqueAlone
            ? sql<Row>`
          select f.* from unnest(${unnest}) u(v) cross join lateral (
            select ${select} from ${sql.table(table)}
            where ${cols} >= u.v and ${cols} <= u.v limit 1
          ) f`
            : probeEach
              ? sql<Row>`
          select f.* from unnest(${unnest}) u(${sql.join(vars)}) cross join lateral (
            select ${select} from ${sql.table(table)}
            where ${sql.join(
              columns.map((c, i) => sql`${sql.ref(c)}::text = u.${vars[i]}`),
              sql` and `,
            )}
            offset 0
          ) f`
              : sql<Row>`
          select ${select} from ${sql.table(table)}
          where (${cols}) in (select * from unnest(${unnest}))`
      return { table, columns, tuples, pk, chain, byPk, query }
    })
    // Outside a transaction (planning on the pool) the reads go at once, each on a connection
    // of its own: their round trips overlap. A transaction's connection takes them in turn.
    const results = this.db.isTransaction
      ? await sequentially(reads.map((r) => () => r.query.execute(this.db)))
      : await Promise.all(reads.map((r) => r.query.execute(this.db)))
    for (const [i, { table, columns, tuples, pk, chain, byPk }] of reads.entries()) {
      const { rows } = results[i]!
      this.queries++
      const known = this.knownTable(table)
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
        const key = keyOf(pk.map((c) => row[c]))
        // A key known already keeps the row first read: reads of one batch must agree.
        if (!known.has(key)) known.set(key, row)
        if (!byPk) {
          const match = keyOf(columns.map((c) => row[c]))
          matches.set(match, [...(matches.get(match) ?? []), key])
        }
      }
      for (const link of links) if (!known.has(keyOf([link]))) known.set(keyOf([link]), null)
      for (const v of tuples) {
        if (byPk) {
          if (!known.has(keyOf(v))) known.set(keyOf(v), null)
        } else {
          const match = keyOf(v)
          this.lookupsOf(table, columns.join(',')).set(match, matches.get(match) ?? [])
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
    for (const [table, changed] of this.overlay) {
      const known = this.base.get(table)
      const under = this.below?.overlay.get(table)
      const deleted: Row[] = []
      const inserted: Row[] = []
      const replaced: [Row, Row][] = []
      for (const [key, now] of changed) {
        const before = under?.has(key) ? under.get(key) : known?.get(key)
        if (before === undefined) throw new Error(`${table} ${key} written but never read`)
        if (before && now) {
          if (differs(before, now)) replaced.push([before, now])
        } else if (before) deleted.push(before)
        else if (now) inserted.push(now)
      }
      if (deleted.length || inserted.length || replaced.length) {
        out.set(table, { deleted, inserted, replaced })
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
    const entries = this.journal.filter((u) => tables.has(u.table))
    const out: { table: string; before: Row | null; after: Row | null }[] = []
    const nextOf = new Map<number, number>()
    const seen = new Map<string, number>()
    entries.forEach((u, i) => {
      const id = `${u.table}${SEP}${u.key}`
      const prevIndex = seen.get(id)
      if (prevIndex !== undefined) nextOf.set(prevIndex, i)
      seen.set(id, i)
    })
    entries.forEach((u, i) => {
      const under = this.below?.overlay.get(u.table)
      const before =
        u.prev !== undefined
          ? u.prev
          : under?.has(u.key)
            ? under.get(u.key)!
            : (this.base.get(u.table)?.get(u.key) ?? null)
      const next = nextOf.get(i)
      const after =
        next !== undefined
          ? (entries[next]!.prev ?? null)
          : (this.overlay.get(u.table)?.get(u.key) ?? null)
      if (before === after) return
      if (before && after && !differs(before, after)) return
      out.push({ table: u.table, before, after })
    })
    return out
  }

  /** The rows of `table` this batch changed, by primary key, as it leaves them (null: deleted). */
  changedRows(table: string): ReadonlyMap<string, Row | null> {
    return this.overlay.get(table) ?? new Map()
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
    for (const [table, known] of this.base) {
      if (!kept.keeps(table)) continue
      const changed = this.overlay.get(table)
      const under = this.below?.overlay.get(table)
      for (const [key, row] of known) {
        if (!changed?.has(key) && !under?.has(key)) rows.push({ table, key, row })
      }
    }
    for (const [table, changed] of this.overlay) {
      if (!kept.keeps(table)) continue
      for (const [key, row] of changed) rows.push({ table, key, row })
    }
    return { rows }
  }

  /**
   * Forgets the batch below once this batch's writes are known: the batch planned on this one
   * reads only this one's changes, so states never hold a chain of earlier batches.
   */
  detach(): void {
    this.below = undefined
  }

  private table(table: string): TableInfo {
    const t = this.schema.get(table)
    if (!t?.primary.length) throw new Error(`no primary key known for table ${table}`)
    return t
  }

  private setOverlay(table: string, key: string, row: Row | null | undefined, log: boolean) {
    let changed = this.overlay.get(table)
    if (!changed) this.overlay.set(table, (changed = new Map()))
    const prev = changed.get(key)
    if (log) this.journal.push({ table, key, prev: changed.has(key) ? prev : undefined })
    const indexes = this.indexes.get(table)
    if (indexes) {
      for (const { columns, index } of indexes.values()) {
        if (prev) index.get(keyOf(columns.map((c) => prev[c])))?.delete(key)
        if (row) {
          const match = keyOf(columns.map((c) => row[c]))
          let set = index.get(match)
          if (!set) index.set(match, (set = new Set()))
          set.add(key)
        }
      }
    }
    if (row === undefined) changed.delete(key)
    else changed.set(key, row)
  }

  /** The overlay's rows by one lookup shape, kept up to date from the first read on. */
  private index(table: string, columns: string[], shape: string): Map<string, Set<string>> {
    let indexes = this.indexes.get(table)
    if (!indexes) this.indexes.set(table, (indexes = new Map()))
    let entry = indexes.get(shape)
    if (!entry) {
      const index = new Map<string, Set<string>>()
      for (const [key, row] of this.overlay.get(table) ?? []) {
        if (!row) continue
        const match = keyOf(columns.map((c) => row[c]))
        let set = index.get(match)
        if (!set) index.set(match, (set = new Set()))
        set.add(key)
      }
      indexes.set(shape, (entry = { columns: [...columns], index }))
    }
    return entry.index
  }

  private keyOfRow(table: string, row: Row): string {
    return primaryKeyOf(this.table(table).primary, row)
  }

  private knownTable(table: string): Map<string, Row | null> {
    let m = this.base.get(table)
    if (!m) this.base.set(table, (m = new Map()))
    return m
  }

  /** The committed row at a key no layer knows yet (null: none), recorded as read; or undefined. */
  private fromCommitted(table: string, key: string): Row | null | undefined {
    const row = this.committed?.get(table, key)
    if (row !== undefined) this.knownTable(table).set(key, row)
    return row
  }

  /** Whether the key is known absent before the batch; if so it is recorded as read. */
  private knownAbsent(table: string, pk: readonly string[], values: unknown[], key: string) {
    if (!this.absent?.has(table, pk, values)) return false
    this.knownTable(table).set(key, null)
    return true
  }

  private miss(lookup: Lookup, values: unknown[]): Row[] {
    this.missCount++
    const shape = `${lookup.table}${SEP}${lookup.columns.join(',')}${lookup.alone ? `${SEP}alone` : ''}`
    let m = this.misses.get(shape)
    if (!m) this.misses.set(shape, (m = { lookup, values: new Map() }))
    m.values.set(keyOf(values), values)
    return NONE
  }
}

/** Whether two column values are the same as Postgres stores them (null and absent alike). */
export function sameValue(a: unknown, b: unknown): boolean {
  return a === b || (a == null && b == null) || (a != null && b != null && String(a) === String(b))
}

/** Whether `now` differs from `before` in any column it has (planned rows may leave defaults out). */
function differs(before: Row, now: Row): boolean {
  for (const [c, v] of Object.entries(now)) if (!sameValue(before[c], v)) return true
  return false
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

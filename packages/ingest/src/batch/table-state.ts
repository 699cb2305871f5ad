// One table's part of a batch's state (state.ts): its rows as they were before the batch, the
// batch's changes to them, the lookups loaded by other columns, and the shapes its reads come in.
// Kept together so that a read finds everything of its table from one object: a batch reads its
// tables hundreds of thousands of times, and each read used to look its table up again in every
// map it consulted.
import type { TableInfo } from './schema.ts'
import { matchOf, type Row, type Value } from './rows.ts'

/** Values to load for one lookup shape, gathered during one planning round. */
export interface Misses {
  table: TableState
  shape: Shape
  /** A primary-key read that never walks up: loaded without the chain above (load-query.ts). */
  alone: boolean
  /** The value tuples, by their key. */
  values: Map<string, Value[]>
  /** The round (BatchState) these misses belong to. */
  round: number
}

/** A lookup shape: the columns a read names, in one order. */
export interface Shape {
  columns: string[]
  /** The columns joined: how shapes of the same columns find each other. */
  name: string
  /** Whether the columns are the primary key (then in its order). */
  primary: boolean
  /** Loaded lookups of this shape (not the primary key's): values' key → primary keys found. */
  found: Map<string, string[]>
  /** This round's misses, once one was noted. */
  misses?: Misses
  /** This round's misses of primary-key reads that load no chain (primary shape only). */
  aloneMisses?: Misses
}

/** One step of the path to a read's shape: each column name in turn, as the read wrote them. */
interface ShapeNode {
  next: Map<string, ShapeNode>
  shape?: Shape
}

/** The overlay's rows by the values of one shape's columns. */
interface ShapeIndex {
  columns: string[]
  index: Map<string, Set<string>>
}

export class TableState {
  readonly name: string
  readonly info: TableInfo
  readonly pk: readonly string[]
  /** Rows as they were before the batch, by primary key; null: known absent. */
  readonly base = new Map<string, Row | null>()
  /** The batch's changes, by primary key; null: deleted. Never holds undefined. */
  readonly overlay = new Map<string, Row | null>()
  /** The same table in the batch below while this state reads through it (state.ts). */
  under: TableState | undefined
  /** Whether `base` / `overlay` were ever filled: the state lists tables in that order. */
  listedBase = false
  listedOverlay = false
  readonly primaryShape: Shape
  private readonly shapes: ShapeNode = { next: new Map() }
  /** Shapes by their columns joined: two write orders of the same columns share one. */
  private readonly shapesByName = new Map<string, Shape>()
  /** Overlay indexes by shape, built when a shape is first read. */
  private readonly indexes = new Map<Shape, ShapeIndex>()

  constructor(name: string, info: TableInfo, under: TableState | undefined) {
    this.name = name
    this.info = info
    this.pk = info.primary
    this.under = under
    const pkName = info.primary.join(',')
    this.primaryShape = {
      columns: [...info.primary],
      name: pkName,
      primary: true,
      found: new Map(),
    }
    this.shapesByName.set(pkName, this.primaryShape)
  }

  /**
   * A read's shape: its columns in one order (sorted; the primary key's own order when they are
   * the primary key). Found by walking the column names as written, not by a joined id: building
   * that string was most of what a read allocated.
   */
  shapeOf(where: Record<string, unknown>): Shape {
    let node = this.shapes
    for (const c in where) {
      let next = node.next.get(c)
      if (!next) node.next.set(c, (next = { next: new Map() }))
      node = next
    }
    let shape = node.shape
    if (!shape) {
      const pk = this.pk
      const columns = Object.keys(where).sort()
      const primary = columns.length === pk.length && pk.every((c) => c in where)
      const name = primary ? pk.join(',') : columns.join(',')
      shape = this.shapesByName.get(name)
      if (!shape) {
        shape = { columns, name, primary: false, found: new Map() }
        this.shapesByName.set(name, shape)
      }
      node.shape = shape
    }
    return shape
  }

  /** The row at this key now (null: none), or undefined when it is not known yet. */
  rowAt(key: string): Row | null | undefined {
    // An overlay holds a row or null (deleted), never undefined: `get` alone tells a key it holds
    // from one it does not.
    const row = this.overlay.get(key)
    if (row !== undefined) return row
    const under = this.under?.overlay.get(key)
    if (under !== undefined) return under
    return this.base.get(key)
  }

  /** The row before the batch (or the batch below) at a changed key. */
  before(key: string): Row | null | undefined {
    const under = this.under?.overlay
    return under?.has(key) ? under.get(key) : this.base.get(key)
  }

  /** Sets the overlay at `key` (undefined: as if never changed), keeping its indexes. */
  setOverlay(key: string, row: Row | null | undefined): Row | null | undefined {
    const prev = this.overlay.get(key)
    for (const { columns, index } of this.indexes.values()) {
      if (prev) index.get(matchOf(columns, prev))?.delete(key)
      if (row) {
        const match = matchOf(columns, row)
        let set = index.get(match)
        if (!set) index.set(match, (set = new Set()))
        set.add(key)
      }
    }
    if (row === undefined) this.overlay.delete(key)
    else this.overlay.set(key, row)
    return prev
  }

  /** The overlay's keys by one shape's values, kept up to date from the first read on. */
  index(shape: Shape): Map<string, Set<string>> {
    let entry = this.indexes.get(shape)
    if (!entry) {
      const { columns } = shape
      const index = new Map<string, Set<string>>()
      for (const [key, row] of this.overlay) {
        if (!row) continue
        const match = matchOf(columns, row)
        let set = index.get(match)
        if (!set) index.set(match, (set = new Set()))
        set.add(key)
      }
      this.indexes.set(shape, (entry = { columns, index }))
    }
    return entry.index
  }

  /** The shape in the batch below with the same columns as this table's `shape`. */
  underShape(shape: Shape): Shape | undefined {
    const under = this.under
    if (!under) return undefined
    if (shape.primary) return under.primaryShape
    let s = under.shapesByName.get(shape.name)
    if (!s) {
      s = { columns: shape.columns, name: shape.name, primary: false, found: new Map() }
      under.shapesByName.set(shape.name, s)
    }
    return s
  }
}

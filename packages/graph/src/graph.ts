// The follow graph in memory: for each actor, the ids it follows and the ids following it, as
// roaring bitmaps (both directions, so either question is one lookup; see set-store.ts for how
// they are held). It mirrors the stock `follow` table's distinct (creator, subjectDid) pairs,
// which is what the follow rpcs answer from.
import type { Db } from '@openplane/db'
import { ActorIds } from './actor-ids.ts'
import { followPages } from './follow-pages.ts'
import { RoaringBitmap32, type ReadonlyRoaringBitmap32 } from './roaring.ts'
import { SetStore } from './set-store.ts'
import {
  encodeChunks,
  readSnapshot,
  writeSnapshot,
  type SnapshotMeta,
  type SnapshotRecord,
} from './snapshot-store.ts'

/** An actor by DID, or by its interned id (from `graph.ids`). */
export type Actor = string | number

/** One target's answer of GetFollowsFollowing. */
export interface FollowsFollowing {
  targetDid: string
  /** The viewer's followees who follow the target, in ascending actor id order. */
  dids: string[]
}

export interface LoadOptions {
  /** Follow rows per page; memory holds one page (default 50 000). */
  pageSize?: number
  /** A mapping to reuse, e.g. one already loaded; a fresh one otherwise. */
  ids?: ActorIds
}

export interface LoadedGraph {
  graph: Graph
  /** `openplane_cursor` (source → seq) as read before the follows: replay from there. */
  cursors: Map<string, number>
}

export interface RestoredGraph {
  graph: Graph
  /** Its `cursor` is the position the caller gave when taking it. */
  snapshot: SnapshotMeta
}

const EMPTY: ReadonlyRoaringBitmap32 = new RoaringBitmap32().freeze()

/**
 * Viewers whose followingDidsIn answer is kept (about 140 bytes each, plus 8 per DID: the DIDs
 * themselves are the id mapping's strings; 18 MiB for 50,000 viewers following 30). The oldest
 * kept goes first when there are more.
 */
const KEPT_ANSWERS = 50_000

/** A followingDidsIn answer, kept while the viewer's follows and the set's version hold. */
interface KeptAnswer {
  set: ReadonlyRoaringBitmap32
  version: number
  dids: readonly string[]
}

export class Graph {
  readonly ids: ActorIds
  #following = new SetStore()
  #followers = new SetStore()
  #edges = 0
  /** #didsOfAnd's working bitmap, empty between calls. */
  readonly #intersection = new RoaringBitmap32()
  /** followingDidsIn's answers by viewer id; a viewer's goes when its follows change. */
  readonly #kept = new Map<number, KeptAnswer>()

  constructor(ids: ActorIds) {
    this.ids = ids
  }

  /** An empty graph interning into `db`. */
  static create(db: Db): Graph {
    return new Graph(new ActorIds(db))
  }

  /**
   * Builds the graph from the stock `follow` table, a page at a time, interning each page's DIDs
   * in one batch. The cursors are read first: every follow row read after is at least that recent,
   * and adding or removing an edge is idempotent, so replaying changes from them converges.
   * Pages come in creator order, so each page's following sets are final and packed at once; the
   * followers sets stay live bitmaps until the end (the load's peak memory).
   */
  static async loadFromPostgres(db: Db, opts: LoadOptions = {}): Promise<LoadedGraph> {
    const rows = await db.db.selectFrom('openplane_cursor').select(['source', 'seq']).execute()
    const cursors = new Map(rows.map((row) => [row.source, row.seq]))
    const graph = new Graph(opts.ids ?? new ActorIds(db))
    graph.#followers.autoFlush = false
    for await (const page of followPages(db, opts.pageSize ?? 50_000)) {
      const ids = await graph.ids.intern(page.flatMap((f) => [f.creator, f.subjectDid]))
      for (let i = 0; i + 1 < ids.length; i += 2) graph.addFollowIds(at(ids, i), at(ids, i + 1))
      graph.#following.flush()
    }
    graph.#followers.autoFlush = true
    graph.compact()
    return { graph, cursors }
  }

  /** Restores the latest snapshot (bitmaps, then the id mapping up to its high-water mark). */
  static async loadSnapshot(
    db: Db,
    opts: { ids?: ActorIds } = {},
  ): Promise<RestoredGraph | undefined> {
    const graph = new Graph(opts.ids ?? new ActorIds(db))
    const snapshot = await readSnapshot(db, (direction, id, count, data) => {
      ;(direction === 0 ? graph.#following : graph.#followers).put(id, count, data)
      if (direction === 0) graph.#edges += count
    })
    if (!snapshot) return undefined
    if (graph.#edges !== snapshot.edgeCount) {
      throw new Error(
        `graph snapshot ${snapshot.id}: ${graph.#edges} edges, expected ${snapshot.edgeCount}`,
      )
    }
    await graph.ids.load({ upTo: snapshot.actorIdHighWater })
    return { graph, snapshot }
  }

  /**
   * Stores the graph as it is now, with `cursor` (e.g. the firehose seq it is consistent with);
   * replaces older snapshots. Serializes synchronously first, so changes made while it is written
   * are not in it; that takes the serialized size in memory. `chunkBytes`: target row size.
   */
  async snapshot(
    db: Db,
    cursor: number,
    opts: { chunkBytes?: number } = {},
  ): Promise<SnapshotMeta> {
    const chunks = encodeChunks(this.#records(), opts.chunkBytes)
    return writeSnapshot(db, chunks, {
      cursor,
      actorIdHighWater: this.ids.highWater,
      edgeCount: this.#edges,
    })
  }

  /**
   * Takes `other`'s edges (a graph freshly loaded over the same id mapping), at once: holders of
   * this graph see the new edges from here on. `other` must not be used afterwards.
   */
  replaceWith(other: Graph): void {
    if (other.ids !== this.ids) throw new Error('graphs over different id mappings')
    this.#following = other.#following
    this.#followers = other.#followers
    this.#edges = other.#edges
    this.#kept.clear()
  }

  get edgeCount(): number {
    return this.#edges
  }

  /**
   * Ids the actor follows. Read-only, valid until the graph next changes (it may be the live set):
   * copy it to keep it.
   */
  following(actor: Actor): ReadonlyRoaringBitmap32 {
    const id = this.#id(actor)
    return (id === undefined ? undefined : this.#following.get(id)) ?? EMPTY
  }

  /**
   * Ids following the actor. Read-only, valid until the graph next changes (it may be the live
   * set): copy it to keep it.
   */
  followers(actor: Actor): ReadonlyRoaringBitmap32 {
    const id = this.#id(actor)
    return (id === undefined ? undefined : this.#followers.get(id)) ?? EMPTY
  }

  followingCount(actor: Actor): number {
    const id = this.#id(actor)
    return id === undefined ? 0 : this.#following.count(id)
  }

  followerCount(actor: Actor): number {
    const id = this.#id(actor)
    return id === undefined ? 0 : this.#followers.count(id)
  }

  isFollowing(actor: Actor, subject: Actor): boolean {
    const a = this.#id(actor)
    const b = this.#id(subject)
    return a !== undefined && b !== undefined && this.#following.has(a, b)
  }

  /**
   * GetFollowsFollowing: for each target (duplicates included, in order), the DIDs the viewer
   * follows who follow the target. Same content as the stock's query; ordered by actor id.
   */
  followsFollowing(viewer: Actor, targets: readonly string[]): FollowsFollowing[] {
    const id = this.#id(viewer)
    const none = () => targets.map((targetDid) => ({ targetDid, dids: [] }))
    if (id === undefined) return none()
    return this.#following.use(id, (mine) => {
      if (!mine) return none()
      return targets.map((targetDid) => {
        const target = this.ids.id(targetDid)
        const dids =
          target === undefined
            ? []
            : this.#followers.use(target, (theirs) => (theirs ? this.#didsOfAnd(mine, theirs) : []))
        return { targetDid, dids }
      })
    })
  }

  /**
   * The DIDs of the members of `set` the viewer follows, ascending by id. Computed in a bitmap
   * kept for it, not a new one: every home timeline read asks this. With `version` (which the
   * caller changes whenever it changes `set`), the answer is kept and given again until the
   * viewer's follows or the set's version change: a reader's followed celebrities rarely do
   * between its reads, and the intersection (a set read out of the arena, then DIDs) cost a home
   * read more than its merge. A kept answer is shared: callers must not change it.
   */
  followingDidsIn(
    viewer: Actor,
    set: ReadonlyRoaringBitmap32,
    version?: number,
  ): readonly string[] {
    const id = this.#id(viewer)
    if (id === undefined) return []
    if (version === undefined) return this.#followingDidsIn(id, set)
    const kept = this.#kept.get(id)
    if (kept && kept.set === set && kept.version === version) return kept.dids
    const dids = Object.freeze(this.#followingDidsIn(id, set))
    const all = this.#kept
    all.delete(id)
    if (all.size >= KEPT_ANSWERS) all.delete(all.keys().next().value!)
    all.set(id, { set, version, dids })
    return dids
  }

  #followingDidsIn(id: number, set: ReadonlyRoaringBitmap32): string[] {
    return this.#following.use(id, (mine) => (mine ? this.#didsOfAnd(mine, set) : []))
  }

  /** Which of `set` (ids, or actors) the viewer follows, as ids. */
  intersectFollowing(
    viewer: Actor,
    set: ReadonlyRoaringBitmap32 | readonly Actor[],
  ): RoaringBitmap32 {
    const id = this.#id(viewer)
    if (id === undefined) return new RoaringBitmap32()
    if (!Array.isArray(set)) {
      const other = set as ReadonlyRoaringBitmap32
      return this.#following.use(id, (mine) =>
        mine ? RoaringBitmap32.and(mine, other) : new RoaringBitmap32(),
      )
    }
    const other = this.#bitmapOf(set)
    try {
      return this.intersectFollowing(id, other)
    } finally {
      other.clear()
    }
  }

  /** The DIDs of a set of ids, ascending by id. */
  didsOf(ids: ReadonlyRoaringBitmap32): string[] {
    const dids: string[] = []
    for (const id of ids.toUint32Array()) {
      const did = this.ids.did(id)
      if (did === undefined) throw new Error(`graph holds actor id ${id}, which is not mapped`)
      dids.push(did)
    }
    return dids
  }

  /** Adds `actor` follows `subject`, interning new DIDs; false if the edge was there. */
  async addFollow(actor: Actor, subject: Actor): Promise<boolean> {
    return (await this.addFollows([[actor, subject]])) === 1
  }

  /** Adds many edges, interning their new DIDs in one batch; returns how many were new. */
  async addFollows(pairs: readonly (readonly [Actor, Actor])[]): Promise<number> {
    await this.ids.intern(pairs.flat().filter((a): a is string => typeof a === 'string'))
    let added = 0
    for (const [actor, subject] of pairs) {
      if (this.addFollowIds(this.#knownId(actor), this.#knownId(subject))) added++
    }
    return added
  }

  /** Adds an edge between interned ids, synchronously; false if it was there. */
  addFollowIds(actor: number, subject: number): boolean {
    if (!this.#following.add(actor, subject)) return false
    this.#kept.delete(actor)
    this.#followers.add(subject, actor)
    this.#edges++
    return true
  }

  /** Removes an edge; false if it was not there. Never needs Postgres (unknown DIDs have none). */
  removeFollow(actor: Actor, subject: Actor): boolean {
    const a = this.#id(actor)
    const b = this.#id(subject)
    if (a === undefined || b === undefined) return false
    if (!this.#following.delete(a, b)) return false
    this.#kept.delete(a)
    this.#followers.delete(b, a)
    this.#edges--
    return true
  }

  /** Packs changed small sets back into the arenas and trims the large ones. */
  compact(): void {
    this.#following.flush()
    this.#followers.flush()
  }

  /** Sum of both directions' sets in the portable serialization. */
  serializedSizeInBytes(): number {
    let bytes = 0
    for (const { byteLength } of this.#records()) bytes += byteLength
    return bytes
  }

  /** Where the memory goes, per direction (see SetStore.stats). */
  memoryStats() {
    return { following: this.#following.stats(), followers: this.#followers.stats() }
  }

  *#records(): Generator<SnapshotRecord> {
    for (const record of this.#following.records()) yield { ...record, direction: 0 }
    for (const record of this.#followers.records()) yield { ...record, direction: 1 }
  }

  /**
   * The DIDs of the ids in both sets, ascending by id; intersected in a bitmap kept for it (a new
   * one per call is a native object each young-generation GC must process as it dies).
   */
  #didsOfAnd(a: ReadonlyRoaringBitmap32, b: ReadonlyRoaringBitmap32): string[] {
    // Copy the smaller, intersect with the larger.
    const [small, large] = a.size <= b.size ? [a, b] : [b, a]
    const both = this.#intersection.copyFrom(small).andInPlace(large)
    try {
      return this.didsOf(both)
    } finally {
      both.clear()
    }
  }

  #id(actor: Actor): number | undefined {
    return typeof actor === 'number' ? actor : this.ids.id(actor)
  }

  #knownId(actor: Actor): number {
    const id = this.#id(actor)
    if (id === undefined) throw new Error(`actor ${actor} is not interned`)
    return id
  }

  #bitmapOf(actors: readonly Actor[]): RoaringBitmap32 {
    const ids = new RoaringBitmap32()
    for (const actor of actors) {
      const id = this.#id(actor)
      if (id !== undefined) ids.add(id)
    }
    return ids
  }
}

function at(ids: readonly number[], i: number): number {
  const id = ids[i]
  if (id === undefined) throw new Error(`no id at ${i}`)
  return id
}

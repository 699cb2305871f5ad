// One direction of the graph: a set of actor ids per actor id.
//
// A RoaringBitmap32 object costs ~300-450 bytes of its own (V8 object, native wrapper, handles,
// roaring header) before any content, and most actors follow or are followed by a few dozen
// accounts: one object per set would cost far more than the ~2 bytes per member of the data. So
// small sets live serialized (roaring's portable format) in a shared arena of segments, located by
// typed arrays, and are deserialized for the moment they are read. Large sets, whose own cost is
// small next to their content, and sets changed since the last flush, are live bitmaps.
import { PORTABLE, RoaringBitmap32, type ReadonlyRoaringBitmap32 } from './roaring.ts'

/** Sets serializing to at least this stay live: their object costs at most ~40% on top. */
const LIVE_BYTES = 1024
/** Arena segment size; arena records are below LIVE_BYTES, so one always fits. */
const SEGMENT_BYTES = 1024 * 1024
/** Small changed sets kept live before they are folded back into the arena. */
const DIRTY_LIMIT = 8192

export interface SetRecord {
  id: number
  count: number
  byteLength: number
  /** Writes the set's portable serialization, exactly `byteLength` bytes, into `target`. */
  write(target: Buffer): void
}

export class SetStore {
  /** Also the garbage worth a compaction. */
  readonly #segmentBytes: number
  readonly #segments: Buffer[] = []
  #tailUsed: number
  // Per id: segment * 2^32 + offset (exact in a double), byte length (0: not in the arena), count.
  #where = new Float64Array(0)
  #bytes = new Uint32Array(0)
  #count = new Uint32Array(0)
  readonly #live = new Map<number, RoaringBitmap32>()
  /**
   * Bitmaps `use` deserializes arena sets into, reused: a bitmap made per call is a native
   * object whose handle every young-generation GC must process when it dies (about half a
   * scavenge's pause when every timeline read made one). One per nesting level of `use`.
   */
  readonly #scratch: RoaringBitmap32[] = []
  #pinned = 0
  #arenaBytes = 0
  #garbage = 0
  /** Off while bulk loading: sets are then flushed once, at the end. */
  autoFlush = true

  constructor(opts: { segmentBytes?: number } = {}) {
    this.#segmentBytes = Math.max(LIVE_BYTES, opts.segmentBytes ?? SEGMENT_BYTES)
    this.#tailUsed = this.#segmentBytes
  }

  /** Members of `id`'s set. */
  count(id: number): number {
    return this.#count[id] ?? 0
  }

  /**
   * Calls `fn` with `id`'s set (or undefined when empty). A set in the arena is materialized for
   * the call only and released after, so `fn` must not keep it.
   */
  use<T>(id: number, fn: (set: ReadonlyRoaringBitmap32 | undefined) => T): T {
    const live = this.#live.get(id)
    if (live) return fn(live)
    const data = this.#slice(id)
    if (!data) return fn(undefined)
    const set = (this.#scratch.pop() ?? new RoaringBitmap32()).deserialize(data, PORTABLE)
    try {
      return fn(set)
    } finally {
      set.clear()
      this.#scratch.push(set)
    }
  }

  /** `id`'s set: the live bitmap itself, or a copy out of the arena (the caller's to keep). */
  get(id: number): ReadonlyRoaringBitmap32 | undefined {
    const live = this.#live.get(id)
    if (live) return live
    const data = this.#slice(id)
    return data && RoaringBitmap32.deserialize(data, PORTABLE)
  }

  has(id: number, member: number): boolean {
    return this.use(id, (set) => set?.has(member) ?? false)
  }

  add(id: number, member: number): boolean {
    const set = this.#mutable(id)
    if (!set.tryAdd(member)) return false
    this.#count[id] = set.size
    return true
  }

  delete(id: number, member: number): boolean {
    if (!this.has(id, member)) return false
    const set = this.#mutable(id)
    set.delete(member)
    this.#count[id] = set.size
    if (set.isEmpty) this.#live.delete(id)
    return true
  }

  /** Stores a serialized set as read from a snapshot. */
  put(id: number, count: number, data: Uint8Array): void {
    this.#grow(id)
    if (this.#bytes[id] || this.#live.has(id)) throw new Error(`set ${id} stored twice`)
    this.#count[id] = count
    if (data.byteLength >= LIVE_BYTES) {
      this.#live.set(id, RoaringBitmap32.deserialize(data, PORTABLE))
      this.#pinned++
    } else {
      this.#append(id, data.byteLength, (target) => target.set(data))
    }
  }

  /** Folds small live sets back into the arena; compacts it when it is mostly garbage. */
  flush(): void {
    for (const [id, set] of this.#live) {
      set.runOptimize()
      const byteLength = set.getSerializationSizeInBytes(PORTABLE)
      if (byteLength >= LIVE_BYTES) continue
      this.#append(id, byteLength, (target) => set.serialize(PORTABLE, target))
      // Not cleared: a caller may still hold it from get(); the collector frees it.
      this.#live.delete(id)
    }
    for (const set of this.#live.values()) set.shrinkToFit()
    this.#pinned = this.#live.size
    if (this.#garbage > this.#segmentBytes && this.#garbage * 2 > this.#arenaBytes) this.#compact()
  }

  /** Every non-empty set, by ascending id. */
  *records(): Generator<SetRecord> {
    for (let id = 0; id < this.#count.length; id++) {
      const count = this.#count[id] ?? 0
      if (count === 0) continue
      const live = this.#live.get(id)
      if (live) {
        yield {
          id,
          count,
          byteLength: live.getSerializationSizeInBytes(PORTABLE),
          write: (target) => void live.serialize(PORTABLE, target),
        }
      } else {
        const data = this.#slice(id)
        if (data) yield { id, count, byteLength: data.length, write: (t) => void t.set(data) }
      }
    }
  }

  /** Where the memory goes, in bytes. */
  stats(): { arena: number; garbage: number; live: number; liveSets: number; index: number } {
    let live = 0
    for (const set of this.#live.values()) live += set.getSerializationSizeInBytes(PORTABLE)
    return {
      arena: this.#segments.length * this.#segmentBytes,
      garbage: this.#garbage,
      live,
      liveSets: this.#live.size,
      index: this.#where.byteLength + this.#bytes.byteLength + this.#count.byteLength,
    }
  }

  /** The live bitmap of `id`, taken out of the arena if it is there. */
  #mutable(id: number): RoaringBitmap32 {
    const live = this.#live.get(id)
    if (live) return live
    // Before taking `id` out, so the set handed back is not folded away under the caller.
    if (this.autoFlush && this.#live.size > this.#pinned + DIRTY_LIMIT) this.flush()
    this.#grow(id)
    const data = this.#slice(id)
    const set = data ? RoaringBitmap32.deserialize(data, PORTABLE) : new RoaringBitmap32()
    if (data) {
      this.#garbage += data.length
      this.#bytes[id] = 0
    }
    this.#live.set(id, set)
    return set
  }

  #slice(id: number): Buffer | undefined {
    const length = this.#bytes[id]
    if (!length) return undefined
    const where = this.#where[id] as number
    const segment = this.#segments[Math.floor(where / 2 ** 32)] as Buffer
    const offset = where % 2 ** 32
    return segment.subarray(offset, offset + length)
  }

  #append(id: number, byteLength: number, write: (target: Buffer) => void): void {
    if (this.#tailUsed + byteLength > this.#segmentBytes) {
      this.#segments.push(Buffer.allocUnsafe(this.#segmentBytes))
      this.#tailUsed = 0
    }
    const segment = this.#segments.length - 1
    const tail = this.#segments[segment] as Buffer
    write(tail.subarray(this.#tailUsed, this.#tailUsed + byteLength))
    this.#grow(id)
    this.#where[id] = segment * 2 ** 32 + this.#tailUsed
    this.#bytes[id] = byteLength
    this.#tailUsed += byteLength
    this.#arenaBytes += byteLength
  }

  /** Copies the arena's live records into fresh segments, dropping the garbage. */
  #compact(): void {
    const old = this.#segments.splice(0)
    const where = this.#where
    const bytes = this.#bytes.slice()
    this.#tailUsed = this.#segmentBytes
    this.#arenaBytes = 0
    this.#garbage = 0
    for (let id = 0; id < bytes.length; id++) {
      const length = bytes[id] as number
      if (!length) continue
      const at = where[id] as number
      const offset = at % 2 ** 32
      const from = (old[Math.floor(at / 2 ** 32)] as Buffer).subarray(offset, offset + length)
      this.#append(id, length, (target) => from.copy(target))
    }
  }

  #grow(id: number): void {
    if (id < this.#count.length) return
    const size = Math.max(1024, 2 ** Math.ceil(Math.log2(id + 1)))
    const where = new Float64Array(size)
    where.set(this.#where)
    const bytes = new Uint32Array(size)
    bytes.set(this.#bytes)
    const count = new Uint32Array(size)
    count.set(this.#count)
    this.#where = where
    this.#bytes = bytes
    this.#count = count
  }
}

// The newest part of the published-event log, held in memory by each serving process: read from
// Postgres once, as the writer commits it, and shared by every consumer that has caught up. A
// consumer further back than memory reads its own pages from Postgres (consumer.ts). New messages
// are polled for: an indexed read after the last cursor, again at once while pages come full. With
// no consumer the tail rests: it reads nothing, holds nothing, and starts again at the log's end.
import type { Kysely } from 'kysely'
import { publishedRange, readPublished, type DatabaseSchema } from '@openplane/db'
import { childLogger } from '@openplane/telemetry'
import { Entry } from './entry.ts'
import { wants, type Filter } from './filter.ts'

const log = childLogger('subscribe')

export interface TailOptions {
  /** Memory the held messages may take (their frames, compressed ones included). */
  memoryBytes: number
  /** Between two reads that found nothing new. */
  pollMs: number
  /** Messages per read. */
  page: number
}

/** A run of messages for one consumer: its bytes (none if the filter passed none) and where it ends. */
export interface Chunk {
  data: Buffer | undefined
  /** The cursor of the last message looked at. */
  last: number
  messages: number
}

export class PublishedTail {
  private readonly db: Kysely<DatabaseSchema>
  private readonly opts: TailOptions
  private entries: Entry[] = []
  /** Index of the first entry still held (evicted ones are sliced off now and then). */
  private first = 0
  private bytes = 0
  /** The newest cursor read. */
  private headUs = 0
  /** Every message after this cursor, up to the head, is held. */
  private floorUs = 0
  private readonly listeners = new Set<() => void>()
  /** Chunks made since the last read, shared by consumers asking the same. */
  private memo = new Map<string, Chunk>()
  private timer: NodeJS.Timeout | undefined
  /** Following the log (false: resting, or stopped). */
  private following = false
  /** The read of where the log ends, while a start waits for it. */
  private starting: Promise<void> | undefined
  /** Bumped at each start and stop, so that a poll of an earlier run ends itself. */
  private run = 0

  constructor(db: Kysely<DatabaseSchema>, opts: TailOptions) {
    this.db = db
    this.opts = opts
  }

  /**
   * Reads where the log ends, then follows it; every caller meanwhile waits for the same read, so
   * none goes on before the head is known.
   */
  start(): Promise<void> {
    if (this.following) return Promise.resolve()
    this.starting ??= this.begin().finally(() => (this.starting = undefined))
    return this.starting
  }

  private async begin(): Promise<void> {
    const run = ++this.run
    const range = await publishedRange(this.db)
    if (run !== this.run) return
    this.entries = []
    this.first = 0
    this.bytes = 0
    this.memo = new Map()
    this.headUs = this.floorUs = range?.last ?? 0
    this.following = true
    void this.poll(run)
  }

  /** Stops following and lets go of what it held. */
  stop(): void {
    this.run++
    this.following = false
    clearTimeout(this.timer)
    this.entries = []
    this.first = 0
    this.bytes = 0
    this.memo = new Map()
    // Nothing known: a consumer asking now finds nothing to send until a start reads the end.
    this.headUs = this.floorUs = 0
  }

  get head(): number {
    return this.headUs
  }

  /** Every message after this cursor is held in memory. */
  get floor(): number {
    return this.floorUs
  }

  /** Whether memory holds every message after `pos`. */
  covers(pos: number): boolean {
    return pos >= this.floorUs
  }

  /** Called after each read that found new messages. */
  onAppend(listener: () => void): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  /**
   * The messages after `pos` (which memory must cover) that `filter` passes, framed, up to about
   * `maxBytes`.
   */
  chunk(pos: number, filter: Filter, compress: boolean, maxBytes: number): Chunk {
    const from = this.indexAfter(pos)
    const key = `${from}|${compress ? 'z' : 't'}|${filter.key}`
    const known = this.memo.get(key)
    if (known) return known
    const made = chunkOf(this.entries, from, this.entries.length, filter, compress, maxBytes)
    const chunk = made ?? { data: undefined, last: pos, messages: 0 }
    this.memo.set(key, chunk)
    return chunk
  }

  /** Index of the first held entry after cursor `pos`. */
  private indexAfter(pos: number): number {
    let lo = this.first
    let hi = this.entries.length
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (this.entries[mid]!.timeUs <= pos) lo = mid + 1
      else hi = mid
    }
    return lo
  }

  private async poll(run: number): Promise<void> {
    if (run !== this.run) return
    let full = false
    try {
      const rows = await readPublished(this.db, this.headUs, this.opts.page)
      if (run !== this.run) return
      if (rows.length) this.append(rows.map((r) => new Entry(r)))
      full = rows.length === this.opts.page
    } catch (err) {
      log.warn({ err }, 'published events not read; trying again')
    }
    if (run !== this.run) return
    if (full) setImmediate(() => void this.poll(run))
    else this.timer = setTimeout(() => void this.poll(run), this.opts.pollMs)
  }

  private append(entries: Entry[]): void {
    for (const e of entries) {
      this.entries.push(e)
      this.bytes += e.size
    }
    this.headUs = entries[entries.length - 1]!.timeUs
    while (this.bytes > this.opts.memoryBytes && this.first < this.entries.length - 1) {
      const old = this.entries[this.first++]!
      this.bytes -= old.size
      this.floorUs = old.timeUs
    }
    if (this.first > 4096 && this.first * 2 > this.entries.length) {
      this.entries = this.entries.slice(this.first)
      this.first = 0
    }
    this.memo = new Map()
    for (const listener of this.listeners) listener()
  }
}

/** Frames of entries [from, to) that the filter passes, up to about `maxBytes`. */
export function chunkOf(
  entries: readonly Entry[],
  from: number,
  to: number,
  filter: Filter,
  compress: boolean,
  maxBytes: number,
): Chunk | undefined {
  if (from >= to) return undefined
  const frames: Buffer[] = []
  let bytes = 0
  let i = from
  for (; i < to && bytes < maxBytes; i++) {
    const e = entries[i]!
    if (!wants(filter, e.did, e.collection, e.bytes)) continue
    const f = e.frame(compress)
    frames.push(f)
    bytes += f.length
  }
  const data =
    frames.length === 0 ? undefined : frames.length === 1 ? frames[0] : Buffer.concat(frames, bytes)
  return { data, last: entries[i - 1]!.timeUs, messages: frames.length }
}

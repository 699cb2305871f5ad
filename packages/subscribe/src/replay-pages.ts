// Pages of the published-event log read from Postgres for consumers further back than memory,
// shared: consumers that start from the same cursor (feed generators reconnecting after a
// restart, a fleet started together) walk the same pages, so each page is read, framed and
// compressed once for all of them, and its run of frames for one filter is joined once. A page is the rows right after a cursor, in order; the log
// only grows at its end, so a page stays true once read.
import type { Kysely } from 'kysely'
import { publishedTrimmed, readPublished, type DatabaseSchema } from '@openplane/db'
import { Entry } from './entry.ts'
import type { Filter } from './filter.ts'
import { chunkOf, type Chunk } from './tail.ts'

/** A page's messages, and its runs of frames by filter. */
export class Page {
  readonly entries: Entry[]
  /**
   * Where the log's trims had reached once the page was read: a trim that took messages after
   * the page's cursor before the read shows here; one after it leaves the page whole.
   */
  readonly trimmed: number
  private readonly chunks = new Map<string, Chunk | undefined>()

  constructor(entries: Entry[], trimmed: number) {
    this.entries = entries
    this.trimmed = trimmed
  }

  /** Every message of the page the filter passes, framed, in one buffer. */
  chunk(filter: Filter, compress: boolean): Chunk | undefined {
    const key = `${compress ? 'z' : 't'}|${filter.key}`
    if (this.chunks.has(key)) return this.chunks.get(key)
    const made = chunkOf(this.entries, 0, this.entries.length, filter, compress, Infinity)
    this.chunks.set(key, made)
    return made
  }
}

export class ReplayPages {
  private readonly db: Kysely<DatabaseSchema>
  private readonly pageSize: number
  private readonly maxBytes: number
  /** By the cursor each page follows; in use order, oldest first. */
  private readonly pages = new Map<number, { entries: Promise<Page>; bytes: number }>()
  private bytes = 0

  constructor(db: Kysely<DatabaseSchema>, opts: { pageSize: number; maxBytes: number }) {
    this.db = db
    this.pageSize = opts.pageSize
    this.maxBytes = opts.maxBytes
  }

  /** The messages right after cursor `after` (none: none stored). */
  get(after: number): Promise<Page> {
    const known = this.pages.get(after)
    if (known) {
      this.pages.delete(after)
      this.pages.set(after, known)
      return known.entries
    }
    const page = { entries: this.read(after), bytes: 0 }
    this.pages.set(after, page)
    page.entries.then(
      ({ entries }) => {
        // An empty page is not kept: the log may grow after it.
        if (!entries.length || this.pages.get(after) !== page) {
          if (this.pages.get(after) === page) this.pages.delete(after)
          return
        }
        // Its joined runs of frames may take as much again.
        page.bytes = entries.reduce((sum, e) => sum + e.size, 0) * 2
        this.bytes += page.bytes
        this.evict()
      },
      () => {
        if (this.pages.get(after) === page) this.pages.delete(after)
      },
    )
    return page.entries
  }

  private async read(after: number): Promise<Page> {
    const rows = await readPublished(this.db, after, this.pageSize)
    return new Page(
      rows.map((r) => new Entry(r)),
      await publishedTrimmed(this.db),
    )
  }

  private evict(): void {
    for (const [after, page] of this.pages) {
      if (this.bytes <= this.maxBytes) return
      this.pages.delete(after)
      this.bytes -= page.bytes
    }
  }
}

// The embedded mode's store: the same lists as Redis, in process. Memory is bounded by the
// per-list target lengths and by caps on how many timelines and author lists are kept (the least
// recently active go first).
import {
  cursorBound,
  decodeMember,
  encodeMember,
  feedUriFields,
  originatorPrefixes,
  checkDid,
} from './member.ts'
import { MemoryList } from './memory-list.ts'
import { checkLength, pageCount, rebuildMembers, trimAbove } from './rebuild.ts'
import { mergeSlices, type Slice } from './slices.ts'
import {
  DEFAULT_AUTHOR_TARGET_LENGTH,
  DEFAULT_TARGET_LENGTH,
  type AuthorPage,
  type MaterialiseOptions,
  type MemoryStats,
  type PageOptions,
  type StorePage,
  type TimelineItem,
  type TimelineStore,
  type TimelineStoreOptions,
} from './types.ts'

export interface MemoryTimelineStoreOptions extends TimelineStoreOptions {
  /** Timelines kept at most; past it, the least recently active reader's is dropped. */
  maxReaders?: number
  /** Celebrity lists kept at most; past it, the least recently seeded is dropped. */
  maxAuthors?: number
}

export class MemoryTimelineStore implements TimelineStore {
  readonly targetLength: number
  readonly authorTargetLength: number
  readonly #maxReaders: number
  readonly #maxAuthors: number
  readonly #timelines = new Map<string, MemoryList>()
  readonly #authors = new Map<string, MemoryList>()
  /** Reader → last active (epoch ms), in touch order: oldest first. */
  readonly #active = new Map<string, number>()

  constructor(opts: MemoryTimelineStoreOptions = {}) {
    this.targetLength = checkLength('targetLength', opts.targetLength ?? DEFAULT_TARGET_LENGTH)
    this.authorTargetLength = checkLength(
      'authorTargetLength',
      opts.authorTargetLength ?? DEFAULT_AUTHOR_TARGET_LENGTH,
    )
    this.#maxReaders = checkLength('maxReaders', opts.maxReaders ?? 100_000)
    this.#maxAuthors = checkLength('maxAuthors', opts.maxAuthors ?? 10_000)
  }

  async fanOut(readers: readonly string[], item: TimelineItem): Promise<number> {
    const member = encodeMember(item)
    let n = 0
    for (const reader of readers.map(checkDid)) {
      n += addTo(this.#timelines.get(reader), [member], this.targetLength)
    }
    return n
  }

  async insert(reader: string, items: readonly TimelineItem[]): Promise<number> {
    const members = items.map(encodeMember)
    return addTo(this.#timelines.get(checkDid(reader)), members, this.targetLength)
  }

  async remove(readers: readonly string[], target: string | TimelineItem): Promise<number> {
    let n = 0
    for (const reader of readers.map(checkDid)) n += removeFrom(this.#timelines.get(reader), target)
    return n
  }

  async removeOriginator(readers: readonly string[], did: string): Promise<number> {
    const [compact, full] = originatorPrefixes(did)
    let n = 0
    for (const reader of readers.map(checkDid)) {
      const list = this.#timelines.get(reader)
      n += list?.removeWhere((f) => f.startsWith(compact) || f.startsWith(full)) ?? 0
    }
    return n
  }

  async page(reader: string, opts: PageOptions): Promise<StorePage | null> {
    const list = this.#timelines.get(checkDid(reader))
    if (list?.state !== 'ready') return null
    const count = pageCount(opts.limit)
    const floor = floorOf(opts)
    const { members, complete } = mergeSlices([list.slice(bound(opts), count, floor)], count, floor)
    return { items: members.map(decodeMember), complete }
  }

  async isMaterialised(reader: string): Promise<boolean> {
    return this.#timelines.get(checkDid(reader))?.state === 'ready'
  }

  async startRebuild(reader: string): Promise<void> {
    this.#timelines.set(checkDid(reader), new MemoryList('warming'))
    await this.touch(reader)
    this.#boundReaders()
  }

  async materialise(
    reader: string,
    items: readonly TimelineItem[],
    opts: MaterialiseOptions,
  ): Promise<void> {
    const { members, ghost } = rebuildMembers(items, opts.complete)
    const current = this.#timelines.get(checkDid(reader))
    const list = current?.state === 'warming' ? current : new MemoryList('ready')
    list.materialise(members, ghost, this.targetLength)
    this.#timelines.set(reader, list)
    await this.touch(reader)
    this.#boundReaders()
  }

  async evict(readers: readonly string[]): Promise<void> {
    for (const reader of readers.map(checkDid)) this.#timelines.delete(reader)
  }

  async evictAuthors(authors: readonly string[]): Promise<void> {
    for (const author of authors.map(checkDid)) this.#authors.delete(author)
  }

  async pushAuthorRecent(author: string, item: TimelineItem): Promise<boolean> {
    const member = encodeMember(item)
    return addTo(this.#authors.get(checkDid(author)), [member], this.authorTargetLength) > 0
  }

  async removeAuthorRecent(author: string, target: string | TimelineItem): Promise<number> {
    return removeFrom(this.#authors.get(checkDid(author)), target)
  }

  async authorRecent(authors: readonly string[], opts: PageOptions): Promise<AuthorPage> {
    const count = pageCount(opts.limit)
    const floor = floorOf(opts)
    const slices: Slice[] = []
    const missing: string[] = []
    for (const author of new Set(authors.map(checkDid))) {
      const list = this.#authors.get(author)
      if (list?.state === 'ready') slices.push(list.slice(bound(opts), count, floor))
      else missing.push(author)
    }
    const { members, complete } = mergeSlices(slices, count, floor)
    return { items: members.map(decodeMember), complete: complete && !missing.length, missing }
  }

  async startAuthorRebuild(author: string): Promise<void> {
    this.#authors.delete(checkDid(author))
    this.#authors.set(author, new MemoryList('warming'))
    this.#boundAuthors()
  }

  async materialiseAuthor(
    author: string,
    items: readonly TimelineItem[],
    opts: MaterialiseOptions,
  ): Promise<void> {
    const { members, ghost } = rebuildMembers(items, opts.complete)
    const current = this.#authors.get(checkDid(author))
    const list = current?.state === 'warming' ? current : new MemoryList('ready')
    list.materialise(members, ghost, this.authorTargetLength)
    this.#authors.delete(author)
    this.#authors.set(author, list)
    this.#boundAuthors()
  }

  async touch(reader: string, at: number = Date.now()): Promise<void> {
    checkDid(reader)
    const last = this.#active.get(reader)
    this.#active.delete(reader)
    this.#active.set(reader, last === undefined ? at : Math.max(last, at))
  }

  async activeSince(since: number): Promise<string[]> {
    return [...this.#active].filter(([, at]) => at >= since).map(([reader]) => reader)
  }

  async evictInactive(before: number): Promise<number> {
    let n = 0
    for (const [reader, at] of this.#active) {
      if (at >= before) continue
      this.#active.delete(reader)
      this.#timelines.delete(reader)
      this.#authors.delete(reader)
      n++
    }
    return n
  }

  async memoryStats(sample: readonly string[] = []): Promise<MemoryStats> {
    let usedBytes = 0
    for (const list of this.#timelines.values()) usedBytes += list.approxBytes()
    for (const list of this.#authors.values()) usedBytes += list.approxBytes()
    const stats = { lists: 0, entries: 0, bytes: 0 }
    for (const reader of sample) {
      const list = this.#timelines.get(reader)
      if (!list) continue
      stats.lists++
      stats.entries += list.items.length
      stats.bytes += list.approxBytes()
    }
    return { backend: 'memory', usedBytes, activeReaders: this.#active.size, sample: stats }
  }

  async close(): Promise<void> {
    this.#timelines.clear()
    this.#authors.clear()
    this.#active.clear()
  }

  #boundReaders(): void {
    if (this.#timelines.size <= this.#maxReaders) return
    for (const reader of this.#active.keys()) {
      if (this.#timelines.delete(reader) && this.#timelines.size <= this.#maxReaders) return
    }
  }

  #boundAuthors(): void {
    for (const author of this.#authors.keys()) {
      if (this.#authors.size <= this.#maxAuthors) return
      this.#authors.delete(author)
    }
  }
}

const addTo = (list: MemoryList | undefined, members: readonly string[], target: number): number =>
  list?.add(members, target, trimAbove(target)) ?? 0

const bound = (opts: PageOptions): string | undefined =>
  opts.before ? cursorBound(opts.before) : undefined

const floorOf = (opts: PageOptions): string | undefined =>
  opts.atLeast ? encodeMember(opts.atLeast) : undefined

function removeFrom(list: MemoryList | undefined, target: string | TimelineItem): number {
  if (!list) return 0
  if (typeof target !== 'string') return list.remove(encodeMember(target))
  const want = feedUriFields(target)
  return list.removeWhere((field, repost) => field === (repost ? want.repost : want.post))
}

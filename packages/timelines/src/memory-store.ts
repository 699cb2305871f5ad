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
import { randomUUID } from 'node:crypto'
import { composeHome, type MemberReads } from './home-read.ts'
import { MemoryList } from './memory-list.ts'
import { checkLength, pageCount, rebuildMembers, trimAbove } from './rebuild.ts'
import { mergeSlices, type Slice } from './slices.ts'
import {
  DEFAULT_AUTHOR_TARGET_LENGTH,
  DEFAULT_REBUILD_LEASE_MS,
  DEFAULT_TARGET_LENGTH,
  type Activations,
  type AuthorMembers,
  type AuthorPage,
  type HomeRead,
  type ListKind,
  type MaterialiseOptions,
  type MemberPage,
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
  /** Rebuild leases by list ('t' reader or 'a' author, then the DID): token and expiry. */
  readonly #leases = new Map<string, { token: string; until: number }>()
  /** Named leases' expiries. */
  readonly #named = new Map<string, number>()
  /** The activation log: readers in order, and how many were dropped from its front. */
  #activated: string[] = []
  #activatedBase = 0

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
    for (const reader of readers.map(checkDid)) {
      n += this.#cancel('t', reader) ? 1 : removeFrom(this.#timelines.get(reader), target)
    }
    return n
  }

  async removeOriginator(readers: readonly string[], did: string): Promise<number> {
    const [compact, full] = originatorPrefixes(did)
    let n = 0
    for (const reader of readers.map(checkDid)) {
      if (this.#cancel('t', reader)) {
        n++
        continue
      }
      const list = this.#timelines.get(reader)
      n += list?.removeWhere((f) => f.startsWith(compact) || f.startsWith(full)) ?? 0
    }
    return n
  }

  async page(reader: string, opts: PageOptions): Promise<StorePage | null> {
    const page = this.#pageMembers(reader, opts)
    return page && { items: page.members.map(decodeMember), complete: page.complete }
  }

  #pageMembers(reader: string, opts: PageOptions): MemberPage | null {
    const list = this.#timelines.get(checkDid(reader))
    if (list?.state !== 'ready') return null
    const count = pageCount(opts.limit)
    const floor = floorOf(opts)
    return mergeSlices([list.slice(bound(opts), count, floor)], count, floor)
  }

  home(reader: string, celebrities: readonly string[], opts: PageOptions): Promise<HomeRead> {
    return composeHome(this.#memberReads, reader, celebrities, opts)
  }

  readonly #memberReads: MemberReads = {
    page: async (reader, opts) => this.#pageMembers(reader, opts),
    authors: async (authors, opts) => this.#authorMembers(authors, opts),
  }

  async isMaterialised(reader: string): Promise<boolean> {
    return this.#timelines.get(checkDid(reader))?.state === 'ready'
  }

  async hasList(reader: string): Promise<boolean> {
    return this.#timelines.has(checkDid(reader))
  }

  startRebuild(
    kind: ListKind,
    key: string,
    leaseMs = DEFAULT_REBUILD_LEASE_MS,
  ): Promise<string | undefined> {
    return kind === 'timeline' ? this.#startTimeline(key, leaseMs) : this.#startAuthor(key, leaseMs)
  }

  materialise(
    kind: ListKind,
    key: string,
    items: readonly TimelineItem[],
    opts: MaterialiseOptions,
  ): Promise<boolean> {
    return kind === 'timeline'
      ? this.#materialiseTimeline(key, items, opts)
      : this.#materialiseAuthor(key, items, opts)
  }

  abandonRebuild(kind: ListKind, key: string, token: string): Promise<void> {
    return kind === 'timeline' ? this.#abandonTimeline(key, token) : this.#abandonAuthor(key, token)
  }

  async #startTimeline(
    reader: string,
    leaseMs = DEFAULT_REBUILD_LEASE_MS,
  ): Promise<string | undefined> {
    const token = this.#start('t', checkDid(reader), leaseMs)
    if (token === undefined) return undefined
    this.#timelines.set(reader, new MemoryList('warming'))
    await this.touch(reader)
    this.#activated.push(reader)
    if (this.#activated.length > ACTIVATION_LOG * 2) {
      this.#activatedBase += this.#activated.length - ACTIVATION_LOG
      this.#activated = this.#activated.slice(-ACTIVATION_LOG)
    }
    this.#boundReaders()
    return token
  }

  async #materialiseTimeline(
    reader: string,
    items: readonly TimelineItem[],
    opts: MaterialiseOptions,
  ): Promise<boolean> {
    const { members, ghost } = rebuildMembers(items, opts.complete)
    if (!this.#owns('t', checkDid(reader), opts.token)) return false
    const current = this.#timelines.get(reader)
    const list = current?.state === 'warming' ? current : new MemoryList('ready')
    list.materialise(members, ghost, this.targetLength)
    this.#timelines.set(reader, list)
    await this.touch(reader)
    this.#boundReaders()
    return true
  }

  async #abandonTimeline(reader: string, token: string): Promise<void> {
    this.#abandon('t', checkDid(reader), token)
  }

  async activations(after: string | undefined): Promise<Activations> {
    const end = this.#activatedBase + this.#activated.length
    if (after === undefined) return { next: String(end), readers: [], gap: false }
    const from = Number(after)
    const gap = from < this.#activatedBase
    const readers = this.#activated.slice(Math.max(0, from - this.#activatedBase))
    return { next: String(end), readers, gap }
  }

  async tryLease(name: string, ms: number): Promise<boolean> {
    const now = Date.now()
    if ((this.#named.get(name) ?? 0) > now) return false
    this.#named.set(name, now + ms)
    return true
  }

  async evict(readers: readonly string[]): Promise<void> {
    for (const reader of readers.map(checkDid)) this.#drop('t', reader)
  }

  async evictAuthors(authors: readonly string[]): Promise<void> {
    for (const author of authors.map(checkDid)) this.#drop('a', author)
  }

  async pushAuthorRecent(author: string, item: TimelineItem): Promise<boolean> {
    const member = encodeMember(item)
    return addTo(this.#authors.get(checkDid(author)), [member], this.authorTargetLength) > 0
  }

  async removeAuthorRecent(author: string, target: string | TimelineItem): Promise<number> {
    if (this.#cancel('a', checkDid(author))) return 1
    return removeFrom(this.#authors.get(author), target)
  }

  async authorRecent(authors: readonly string[], opts: PageOptions): Promise<AuthorPage> {
    const { members, complete, missing } = this.#authorMembers(authors, opts)
    return { items: members.map(decodeMember), complete, missing }
  }

  #authorMembers(authors: readonly string[], opts: PageOptions): AuthorMembers {
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
    return { members, complete: complete && !missing.length, missing }
  }

  async #startAuthor(
    author: string,
    leaseMs = DEFAULT_REBUILD_LEASE_MS,
  ): Promise<string | undefined> {
    const token = this.#start('a', checkDid(author), leaseMs)
    if (token === undefined) return undefined
    this.#authors.delete(author)
    this.#authors.set(author, new MemoryList('warming'))
    this.#boundAuthors()
    return token
  }

  async #materialiseAuthor(
    author: string,
    items: readonly TimelineItem[],
    opts: MaterialiseOptions,
  ): Promise<boolean> {
    const { members, ghost } = rebuildMembers(items, opts.complete)
    if (!this.#owns('a', checkDid(author), opts.token)) return false
    const current = this.#authors.get(author)
    const list = current?.state === 'warming' ? current : new MemoryList('ready')
    list.materialise(members, ghost, this.authorTargetLength)
    this.#authors.delete(author)
    this.#authors.set(author, list)
    this.#boundAuthors()
    return true
  }

  async #abandonAuthor(author: string, token: string): Promise<void> {
    this.#abandon('a', checkDid(author), token)
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
      this.#leases.delete(`t${reader}`)
      this.#leases.delete(`a${reader}`)
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

  /** Takes a list's rebuild lease (as the START script): a token, or undefined while held. */
  #start(kind: 't' | 'a', did: string, leaseMs: number): string | undefined {
    const key = kind + did
    const now = Date.now()
    if ((this.#leases.get(key)?.until ?? 0) > now) return undefined
    const token = randomUUID()
    this.#leases.set(key, { token, until: now + leaseMs })
    return token
  }

  /** Whether a materialise with `token` may write (as MATERIALISE), releasing the lease. */
  #owns(kind: 't' | 'a', did: string, token: string | undefined): boolean {
    if (token === undefined) return true
    const key = kind + did
    const lease = this.#leases.get(key)
    if (lease?.token !== token || lease.until <= Date.now()) return false
    this.#leases.delete(key)
    return true
  }

  /** A removal reaching a list under rebuild drops it instead (as cancel_rebuild). */
  #cancel(kind: 't' | 'a', did: string): boolean {
    if (this.#lists(kind).get(did)?.state !== 'warming') return false
    this.#drop(kind, did)
    return true
  }

  /** A failed rebuild's lease and list go, if it still holds them (as ABANDON). */
  #abandon(kind: 't' | 'a', did: string, token: string): void {
    if (this.#leases.get(kind + did)?.token === token) this.#drop(kind, did)
  }

  #drop(kind: 't' | 'a', did: string): void {
    this.#lists(kind).delete(did)
    this.#leases.delete(kind + did)
  }

  #lists(kind: 't' | 'a'): Map<string, MemoryList> {
    return kind === 't' ? this.#timelines : this.#authors
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

/** Activation log entries kept. */
const ACTIVATION_LOG = 100_000

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

// Timelines in Redis, single or Cluster. Keys:
//   <prefix>t:{<reader>}   the reader's timeline (sorted set, members from member.ts)
//   <prefix>a:{<author>}   a celebrity's recent items (same shape)
//   <prefix>t:{<reader>}:w the lease of a rebuild under way (and <prefix>a:{<author>}:w)
//   <prefix>heads          hash: author list key → its head's time to the second, while materialised
//                          (single Redis only; lets a home read pass over lists, redis-scripts.ts)
//   <prefix>heads:v        hash: author list key → its version, while materialised (the same;
//                          lets a process keep a copy of a celebrity list's top)
//   <prefix>heads:n        the counter versions are taken from
//   <prefix>active         reader → last active epoch ms (the hibernation index)
//   <prefix>activated      stream of readers whose rebuild started (the fan-out writer's feed)
//   <prefix>lease:<name>   a periodic task's lease among processes sharing the store
// Per-list keys are hash-tagged by DID, so everything one reader owns shares a slot and every
// multi-command step on a list (scripts, MULTI) touches one slot. Work on many readers (fan-out,
// removals, eviction) is grouped by the node serving each key and sent as one script call per
// `batchSize` readers, a few calls in flight at a time. One class, at this length, because every
// operation shares the key layout above, the Cluster grouping and the deadline on each call.
import { randomUUID } from 'node:crypto'
import { Cluster, type Redis } from 'ioredis'
import { TimelineStoreUnavailable, withDeadline } from './errors.ts'
import {
  checkDid,
  decodeMember,
  encodeMember,
  feedUriFields,
  lexMax,
  originatorPrefixes,
  READY,
  TRUNCATED,
  WARMING,
  WARMING_T,
} from './member.ts'
import type { RedisClient } from './redis-client.ts'
import {
  ABANDON,
  ADD,
  DROP,
  FORGET,
  HOME,
  MATERIALISE,
  REMOVE,
  SLICES,
  START,
  type LuaScript,
} from './redis-scripts.ts'
import { composeHome, type MemberReads } from './home-read.ts'
import { checkLength, pageCount, rebuildMembers, trimAbove } from './rebuild.ts'
import {
  authorPage,
  homeReads,
  parseSlice,
  type CopyReads,
  type Head,
  type ListCopy,
  type Read,
} from './redis-reads.ts'
import { mergeSlices, type Slice } from './slices.ts'
import { keySlot } from './slot.ts'
import { TurnWrites } from './turn-writes.ts'
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

/** A home read's celebrities, each once, and their lists' keys in the same order. */
interface CelebrityKeys {
  authors: readonly string[]
  keys: readonly string[]
}

const NO_CELEBRITIES: CelebrityKeys = Object.freeze({ authors: [], keys: [] })

/** Celebrity keys kept made (about 100 bytes each); far more than a network's celebrities. */
const CELEBRITY_KEYS_CACHED = 10_000

export interface RedisTimelineStoreOptions extends TimelineStoreOptions {
  /** Key prefix (no braces: they would change the hash tag). */
  prefix?: string
  /** Deadline of one operation, or of one batch of a fan-out. */
  timeoutMs?: number
  /** Readers per script call of a fan-out (or removal, eviction). */
  batchSize?: number
  /** Connection errors (the store reports failures through TimelineStoreUnavailable too). */
  onError?: (err: Error) => void
  /** Entries kept in the activation log (approximately; older ones are trimmed). */
  activationLogLength?: number
  /**
   * Celebrity lists whose top a process keeps a copy of for home reads (single Redis only; 0:
   * none). A copy holds a first page of members (52 for the AppView's pages of 50), some 6 KB.
   */
  celebrityCopies?: number
}

/** Celebrity list copies kept by default: at ~6 KB each, up to ~30 MB a process. */
export const DEFAULT_CELEBRITY_COPIES = 5000

export class RedisTimelineStore implements TimelineStore {
  readonly targetLength: number
  readonly authorTargetLength: number
  readonly #client: RedisClient
  readonly #prefix: string
  readonly #timeoutMs: number
  readonly #batchSize: number
  readonly #activationLogLength: number
  /** A single Redis's one connection: each turn's commands in one write. */
  readonly #turn: TurnWrites | undefined
  /**
   * The author lists' heads index (redis-scripts.ts), or '' on a Cluster: its lists live on
   * several nodes and its home reads are composed list by list, which the heads would not speed.
   */
  readonly #heads: string
  /**
   * Celebrities' list keys as home reads name them: every read names a few dozen of the same
   * accounts, so their keys are made (and checked) once, not on every read. Bounded: emptied
   * when it reaches CELEBRITY_KEYS_CACHED.
   */
  readonly #celebrityKeys = new Map<string, string>()
  /** #celebrityKeysOf's answers, by the frozen array they were asked for (held while it is). */
  readonly #keysOf = new WeakMap<readonly string[], CelebrityKeys>()
  /**
   * Copies of celebrity lists' tops, by key (redis-reads.ts ListCopy): most lists a home read
   * names have not changed since the last read that named them, and asking whether a copy still
   * holds costs Redis a hash lookup instead of a range. Insertion order is age.
   */
  readonly #copies = new Map<string, ListCopy>()
  readonly #copiesKept: number

  /** Takes ownership of `client` (see createRedisClient): `close()` quits it. */
  constructor(client: RedisClient, opts: RedisTimelineStoreOptions = {}) {
    this.#client = client
    this.#prefix = opts.prefix ?? 'openplane:tl:'
    if (/[{}]/.test(this.#prefix)) throw new TypeError('prefix must not contain braces')
    this.targetLength = checkLength('targetLength', opts.targetLength ?? DEFAULT_TARGET_LENGTH)
    this.authorTargetLength = checkLength(
      'authorTargetLength',
      opts.authorTargetLength ?? DEFAULT_AUTHOR_TARGET_LENGTH,
    )
    this.#timeoutMs = checkLength('timeoutMs', opts.timeoutMs ?? 500)
    this.#batchSize = checkLength('batchSize', opts.batchSize ?? 500)
    this.#activationLogLength = checkLength(
      'activationLogLength',
      opts.activationLogLength ?? 100_000,
    )
    this.#copiesKept = Math.max(0, Math.floor(opts.celebrityCopies ?? DEFAULT_CELEBRITY_COPIES))
    this.#turn = client instanceof Cluster ? undefined : new TurnWrites(client)
    this.#heads = client instanceof Cluster ? '' : `${this.#prefix}heads`
    const onError = opts.onError ?? (() => {})
    client.on('error', onError)
    if (client instanceof Cluster) client.on('node error', onError)
  }

  async fanOut(readers: readonly string[], item: TimelineItem): Promise<number> {
    const args = [this.targetLength, trimAbove(this.targetLength), '', encodeMember(item)]
    return this.#batched('fanOut', readers, (r) => this.#timeline(r), ADD, args)
  }

  async insert(reader: string, items: readonly TimelineItem[]): Promise<number> {
    if (!items.length) return 0
    const args = [this.targetLength, trimAbove(this.targetLength), '', ...items.map(encodeMember)]
    return this.#batched('insert', [reader], (r) => this.#timeline(r), ADD, args)
  }

  async remove(readers: readonly string[], target: string | TimelineItem): Promise<number> {
    const args = ['', ...removeArgs(target)]
    return this.#batched('remove', readers, (r) => this.#timeline(r), REMOVE, args)
  }

  async removeOriginator(readers: readonly string[], did: string): Promise<number> {
    const args = ['', 'o', ...originatorPrefixes(did)]
    return this.#batched('removeOriginator', readers, (r) => this.#timeline(r), REMOVE, args)
  }

  async page(reader: string, opts: PageOptions): Promise<StorePage | null> {
    const page = await this.#pageMembers(reader, opts)
    return page && { items: page.members.map(decodeMember), complete: page.complete }
  }

  async #pageMembers(reader: string, opts: PageOptions): Promise<MemberPage | null> {
    const count = pageCount(opts.limit)
    const key = this.#timeline(reader)
    const [read] = await this.#op('page', () => this.#slices([key], opts, count))
    const { head, slice } = read!
    if (!head.ready) return null
    return mergeSlices([slice], count, floorOf(opts))
  }

  async home(reader: string, celebrities: readonly string[], opts: PageOptions): Promise<HomeRead> {
    // A Cluster keeps the celebrities' lists on other nodes than the reader's.
    if (this.#client instanceof Cluster) {
      return composeHome(this.#memberReads, reader, celebrities, opts)
    }
    const count = pageCount(opts.limit)
    const { authors, keys } = this.#celebrityKeysOf(celebrities)
    const args: (string | number)[] = [
      count,
      lexMax(opts.before),
      this.#author(reader),
      this.#heads,
      keys.length,
      ...keys,
    ]
    // Copies serve first pages only (a later page reads below a cursor), and need the versions
    // kept beside the heads.
    let copies: CopyReads | undefined
    if (opts.before === undefined && this.#heads && keys.length && this.#copiesKept > 0) {
      const named = keys.map((k) => {
        const copy = this.#copies.get(k)
        return copy && copy.count >= count ? copy : undefined
      })
      for (const copy of named) args.push(copy ? copy.version : '')
      copies = { named, keep: (i, copy) => this.#keepCopy(keys[i]!, copy), used: 0 }
    }
    const [rows, reply] = await this.#op('home', () =>
      this.#homeCall(this.#timeline(reader), count, args),
    )
    const lists = homeReads(reply, count, rows, copies)
    const [tl, own] = lists as [Read, Read]
    const timeline = tl.head.ready ? mergeSlices([tl.slice], count) : null
    if (lists.length !== (timeline ? 2 + authors.length : 2))
      throw new Error(`the HOME script answered ${lists.length} lists`)
    // The script read the celebrities and the own list down to the timeline's last item when
    // there were celebrities and the page was full.
    const full = timeline !== null && authors.length > 0 && timeline.members.length === count
    const floor = full ? timeline.members[count - 1] : undefined
    const ownPage = authorPage([own], [reader], count, floor)
    if (!timeline || !authors.length) return { timeline, own: ownPage, celebrities: undefined }
    return {
      timeline,
      own: ownPage,
      celebrities: authorPage(lists.slice(2), authors, count, floor),
      copies: { named: keys.length, used: copies?.used ?? 0 },
    }
  }

  /**
   * The timeline's rows (a plain ZRANGE: no Lua strings made of them) and HOME's reply for the
   * rest, in one transaction: the floor HOME reads the other lists down to is the page's. Sent as
   * four plain commands, not through ioredis's transaction object (a Pipeline: its closures and
   * bookkeeping made young collections four times as long in bench:timeline); they are written in
   * one go, as nothing runs between them, so no other command enters the transaction.
   */
  async #homeCall(
    key: string,
    count: number,
    args: readonly (string | number)[],
  ): Promise<[string[], string]> {
    const client = this.#client as Redis
    const max = args[1]!
    const call = async (evalsha: boolean): Promise<[string[], string]> => {
      const sent = [
        client.multi({ pipeline: false }),
        client.zrange(key, max, '-', 'BYLEX', 'REV', 'LIMIT', 0, count + 1),
        evalsha
          ? client.evalsha(HOME.sha, 1, key, ...args)
          : client.eval(HOME.source, 1, key, ...args),
        client.exec(),
      ] as const
      const [, , queued, done] = await Promise.allSettled(sent)
      // Refused when queued (the transaction is then discarded), or failed as a whole.
      if (queued.status === 'rejected') throw queued.reason
      if (done.status === 'rejected') throw done.reason
      return [reply<string[]>(done.value, 0), reply<string>(done.value, 1)]
    }
    try {
      return await call(true)
    } catch (err) {
      // A restarted or failed-over Redis lost its scripts.
      if (!isNoScript(err)) throw err
      return call(false)
    }
  }

  /** Keeps a celebrity list's copy, the oldest kept going first when there are too many. */
  #keepCopy(key: string, copy: ListCopy): void {
    const copies = this.#copies
    copies.delete(key)
    if (copies.size >= this.#copiesKept) copies.delete(copies.keys().next().value!)
    copies.set(key, copy)
  }

  readonly #memberReads: MemberReads = {
    page: (reader, opts) => this.#pageMembers(reader, opts),
    authors: (authors, opts) => this.#authorMembers(authors, opts),
  }

  async isMaterialised(reader: string): Promise<boolean> {
    const key = this.#timeline(reader)
    const [state] = await this.#op('isMaterialised', () => this.#client.zrange(key, -1, -1))
    return state === READY || state === TRUNCATED
  }

  async hasList(reader: string): Promise<boolean> {
    const key = this.#timeline(reader)
    const [state] = await this.#op('hasList', () => this.#client.zrange(key, -1, -1))
    return state === READY || state === TRUNCATED || state === WARMING || state === WARMING_T
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
    const token = await this.#start('startRebuild', this.#timeline(reader), leaseMs)
    if (token === undefined) return undefined
    // In this order: the list collects writes before the writer learns the reader is active,
    // and the activity index has the reader before the log does (a writer starting reads the
    // index, then the log from where it stood).
    await this.touch(reader)
    await this.#op('startRebuild', () =>
      this.#client.xadd(
        this.#activated(),
        'MAXLEN',
        '~',
        this.#activationLogLength,
        '*',
        'r',
        reader,
      ),
    )
    return token
  }

  async #materialiseTimeline(
    reader: string,
    items: readonly TimelineItem[],
    opts: MaterialiseOptions,
  ): Promise<boolean> {
    const done = await this.#materialise(this.#timeline(reader), items, opts, this.targetLength)
    if (done) await this.touch(reader)
    return done
  }

  async #abandonTimeline(reader: string, token: string): Promise<void> {
    await this.#op('abandonRebuild', () => this.#eval(ABANDON, [this.#timeline(reader)], [token]))
  }

  async activations(after: string | undefined): Promise<Activations> {
    const key = this.#activated()
    if (after === undefined) {
      const [last] = await this.#op('activations', () =>
        this.#client.xrevrange(key, '+', '-', 'COUNT', 1),
      )
      return { next: last?.[0] ?? '0-0', readers: [], gap: false }
    }
    const [first, read] = await this.#op('activations', () =>
      Promise.all([
        this.#client.xrange(key, '-', '+', 'COUNT', 1),
        this.#client.xread('COUNT', ACTIVATIONS_PER_READ, 'STREAMS', key, after),
      ]),
    )
    const entries = read?.[0]?.[1] ?? []
    const oldest = first[0]?.[0]
    // The oldest entry kept is past where we stood, with entries between them trimmed away.
    const gap =
      oldest !== undefined &&
      after !== '0-0' &&
      compareStreamIds(oldest, after) > 0 &&
      entries[0]?.[0] !== oldest
    const readers: string[] = []
    for (const [, fields] of entries) {
      const i = fields.indexOf('r')
      if (i >= 0 && fields[i + 1]) readers.push(fields[i + 1]!)
    }
    return { next: entries.at(-1)?.[0] ?? after, readers, gap }
  }

  async tryLease(name: string, ms: number): Promise<boolean> {
    const key = `${this.#prefix}lease:${name}`
    const got = await this.#op('tryLease', () => this.#client.set(key, '1', 'PX', ms, 'NX'))
    return got === 'OK'
  }

  async evict(readers: readonly string[]): Promise<void> {
    await this.#batched('evict', readers, (r) => this.#timeline(r), DROP, [''])
  }

  async evictAuthors(authors: readonly string[]): Promise<void> {
    await this.#batched('evictAuthors', authors, (a) => this.#author(a), DROP, [this.#heads])
  }

  async pushAuthorRecent(author: string, item: TimelineItem): Promise<boolean> {
    const target = this.authorTargetLength
    const args = [target, trimAbove(target), this.#heads, encodeMember(item)]
    return (
      (await this.#batched('pushAuthorRecent', [author], (a) => this.#author(a), ADD, args)) > 0
    )
  }

  async removeAuthorRecent(author: string, target: string | TimelineItem): Promise<number> {
    const args = [this.#heads, ...removeArgs(target)]
    return this.#batched('removeAuthorRecent', [author], (a) => this.#author(a), REMOVE, args)
  }

  async authorRecent(authors: readonly string[], opts: PageOptions): Promise<AuthorPage> {
    const { members, complete, missing } = await this.#authorMembers(authors, opts)
    return { items: members.map(decodeMember), complete, missing }
  }

  async #authorMembers(authors: readonly string[], opts: PageOptions): Promise<AuthorMembers> {
    const count = pageCount(opts.limit)
    const unique = [...new Set(authors)]
    const keys = unique.map((a) => this.#author(a))
    const read = await this.#op('authorRecent', () => this.#slices(keys, opts, count))
    return authorPage(read, unique, count, floorOf(opts))
  }

  async #startAuthor(
    author: string,
    leaseMs = DEFAULT_REBUILD_LEASE_MS,
  ): Promise<string | undefined> {
    return this.#start('startAuthorRebuild', this.#author(author), leaseMs, this.#heads)
  }

  async #materialiseAuthor(
    author: string,
    items: readonly TimelineItem[],
    opts: MaterialiseOptions,
  ): Promise<boolean> {
    return this.#materialise(
      this.#author(author),
      items,
      opts,
      this.authorTargetLength,
      this.#heads,
    )
  }

  async #abandonAuthor(author: string, token: string): Promise<void> {
    await this.#op('abandonRebuild', () => this.#eval(ABANDON, [this.#author(author)], [token]))
  }

  async touch(reader: string, at: number = Date.now()): Promise<void> {
    checkDid(reader)
    await this.#op('touch', () => this.#client.zadd(this.#active(), 'GT', at, reader))
  }

  async activeSince(since: number): Promise<string[]> {
    return this.#op('activeSince', () =>
      this.#client.zrange(this.#active(), since, '+inf', 'BYSCORE'),
    )
  }

  async evictInactive(before: number): Promise<number> {
    const active = this.#active()
    let n = 0
    for (;;) {
      const batch = await this.#op('evictInactive', () =>
        this.#client.zrange(active, '-inf', `(${before}`, 'BYSCORE', 'LIMIT', 0, 500),
      )
      if (!batch.length) return n
      await this.evict(batch)
      await this.evictAuthors(batch)
      n += Number(
        await this.#op('evictInactive', () => this.#eval(FORGET, [active], [before, ...batch])),
      )
    }
  }

  async memoryStats(sample: readonly string[] = []): Promise<MemoryStats> {
    const client = this.#client
    const masters = client instanceof Cluster ? client.nodes('master') : [client]
    const [infos, activeReaders] = await this.#op('memoryStats', () =>
      Promise.all([
        Promise.all(masters.map((m) => m.info('memory'))),
        client.zcard(this.#active()),
      ]),
    )
    const usedBytes = infos.reduce(
      (sum, info) => sum + Number(/used_memory:(\d+)/.exec(info)?.[1]),
      0,
    )
    const stats = { lists: 0, entries: 0, bytes: 0 }
    for (let i = 0; i < sample.length; i += this.#batchSize) {
      const keys = sample.slice(i, i + this.#batchSize).map((r) => this.#timeline(r))
      const sizes = await this.#op('memoryStats', () => Promise.all(keys.map((k) => this.#size(k))))
      for (const size of sizes) {
        if (!size) continue
        stats.lists++
        stats.entries += size.entries
        stats.bytes += size.bytes
      }
    }
    return { backend: 'redis', usedBytes, activeReaders, sample: stats }
  }

  async close(): Promise<void> {
    await withDeadline(this.#client.quit(), this.#timeoutMs).catch(() => this.#client.disconnect())
  }

  #timeline(reader: string): string {
    return `${this.#prefix}t:{${checkDid(reader)}}`
  }

  #author(author: string): string {
    return `${this.#prefix}a:{${checkDid(author)}}`
  }

  /**
   * A home read's celebrities without repeats, and their list keys. Kept per array given when it
   * is frozen (the graph gives the same frozen array while a reader's followed celebrities stay
   * the same); an array that could change is read afresh.
   */
  #celebrityKeysOf(celebrities: readonly string[]): CelebrityKeys {
    if (!celebrities.length) return NO_CELEBRITIES
    let got = this.#keysOf.get(celebrities)
    if (!got) {
      const unique = [...new Set(celebrities)]
      // The graph's answers have no repeats: keep the array given rather than a copy of it.
      const authors = unique.length === celebrities.length ? celebrities : unique
      got = { authors, keys: authors.map((a) => this.#celebrityKey(a)) }
      if (Object.isFrozen(celebrities)) this.#keysOf.set(celebrities, got)
    }
    return got
  }

  #celebrityKey(author: string): string {
    let key = this.#celebrityKeys.get(author)
    if (key === undefined) {
      key = this.#author(author)
      if (this.#celebrityKeys.size >= CELEBRITY_KEYS_CACHED) this.#celebrityKeys.clear()
      this.#celebrityKeys.set(author, key)
    }
    return key
  }

  #active(): string {
    return `${this.#prefix}active`
  }

  #activated(): string {
    return `${this.#prefix}activated`
  }

  /** Runs `work` under the deadline; Redis failures become TimelineStoreUnavailable. */
  async #op<T>(op: string, work: () => Promise<T>): Promise<T> {
    this.#turn?.hold()
    const pending = work() // input errors thrown while building the call stay what they are
    try {
      return await withDeadline(pending, this.#timeoutMs)
    } catch (err) {
      throw new TimelineStoreUnavailable(op, err)
    }
  }

  /**
   * Runs a batch script over the ids' keys: grouped by serving node, `batchSize` keys per call,
   * PARALLEL calls in flight, each wave under the deadline. Sums the replies.
   */
  async #batched(
    op: string,
    ids: readonly string[],
    key: (id: string) => string,
    script: LuaScript,
    args: readonly (string | number)[],
  ): Promise<number> {
    const chunks = this.#chunks(ids.map((id) => ({ id, key: key(id) })))
    const idsFrom = (i: number): string[] => chunks.slice(i).flatMap((c) => c.map((x) => x.id))
    let n = 0
    for (let i = 0; i < chunks.length; i += PARALLEL) {
      const wave = chunks.slice(i, i + PARALLEL)
      this.#turn?.hold()
      const calls = wave.map((c) =>
        this.#evalKeys(
          script,
          c.map((x) => x.key),
          args,
        ),
      )
      let results: PromiseSettledResult<number>[]
      try {
        results = await withDeadline(Promise.allSettled(calls), this.#timeoutMs)
      } catch (err) {
        throw new TimelineStoreUnavailable(op, err, idsFrom(i))
      }
      const failed = wave.filter((_, j) => results[j]!.status === 'rejected')
      if (failed.length) {
        const first = results.find((r) => r.status === 'rejected') as PromiseRejectedResult
        const unconfirmed = [...failed.flat().map((x) => x.id), ...idsFrom(i + PARALLEL)]
        throw new TimelineStoreUnavailable(op, first.reason, unconfirmed)
      }
      for (const r of results) n += (r as PromiseFulfilledResult<number>).value
    }
    return n
  }

  /** Keyed ids in groups a single script call may take: one node's keys, `batchSize` at most. */
  #chunks<T extends { key: string }>(keyed: readonly T[]): T[][] {
    const client = this.#client
    const groups = new Map<string, T[]>()
    for (const x of keyed) {
      const node = client instanceof Cluster ? (client.slots[keySlot(x.key)]?.[0] ?? '') : ''
      const group = groups.get(node)
      if (group) group.push(x)
      else groups.set(node, [x])
    }
    const chunks: T[][] = []
    for (const group of groups.values()) {
      for (let i = 0; i < group.length; i += this.#batchSize) {
        chunks.push(group.slice(i, i + this.#batchSize))
      }
    }
    return chunks
  }

  /**
   * One batch script call over several keys, routed by the first. If the slot map was stale (the
   * keys are not all on that node), falls back to one call per key. The steps are idempotent, so
   * keys the failed call had already handled end up right; only the returned count misses them.
   */
  async #evalKeys(
    script: LuaScript,
    keys: readonly string[],
    args: readonly (string | number)[],
  ): Promise<number> {
    const call = (ks: readonly string[]) =>
      this.#eval(script, [ks[0]!], [ks.length, ...ks, ...args])
    try {
      return Number(await call(keys))
    } catch (err) {
      const routing = err instanceof Error && ROUTING_ERROR.test(err.message)
      if (!routing || keys.length === 1) throw err
      const each = await Promise.all(keys.map((k) => call([k])))
      return each.reduce<number>((sum, x) => sum + Number(x), 0)
    }
  }

  /** EVALSHA, loading the script on NOSCRIPT (a restarted or failed-over node). */
  async #eval(
    script: LuaScript,
    keys: readonly string[],
    args: readonly (string | number)[],
  ): Promise<unknown> {
    try {
      return await this.#client.evalsha(script.sha, keys.length, ...keys, ...args)
    } catch (err) {
      if (!isNoScript(err)) throw err
      return this.#client.eval(script.source, keys.length, ...keys, ...args)
    }
  }

  /**
   * For each list, read atomically: its state and horizon, and `count` items below the cursor
   * (down to the floor). One script call per node and `batchSize` lists, in key order.
   */
  async #slices(
    keys: readonly string[],
    opts: PageOptions,
    count: number,
  ): Promise<{ head: Head; slice: Slice }[]> {
    const args = [count, lexMax(opts.before), floorBound(opts)]
    const byKey = new Map<string, { head: Head; slice: Slice }>()
    const chunks = this.#chunks(keys.map((key) => ({ key })))
    await Promise.all(
      chunks.map(async (chunk) => {
        const ks = chunk.map((c) => c.key)
        const call = (some: readonly string[]) =>
          this.#eval(SLICES, [some[0]!], [some.length, ...some, ...args]) as Promise<string[][]>
        let rows: string[][]
        try {
          rows = await call(ks)
        } catch (err) {
          // A stale slot map put keys of another node in the call: read them one by one.
          if (!(err instanceof Error && ROUTING_ERROR.test(err.message)) || ks.length === 1)
            throw err
          rows = (await Promise.all(ks.map((k) => call([k])))).map((r) => r[0]!)
        }
        ks.forEach((k, i) => byKey.set(k, parseSlice(rows[i]!, count)))
      }),
    )
    return keys.map((k) => byKey.get(k)!)
  }

  async #start(op: string, key: string, leaseMs: number, heads = ''): Promise<string | undefined> {
    const token = randomUUID()
    const started = await this.#op(op, () => this.#eval(START, [key], [token, leaseMs, heads]))
    return Number(started) === 1 ? token : undefined
  }

  async #materialise(
    key: string,
    items: readonly TimelineItem[],
    opts: MaterialiseOptions,
    target: number,
    heads = '',
  ): Promise<boolean> {
    const { members, ghost } = rebuildMembers(items, opts.complete)
    const args = [target, ghost ?? '', opts.token ?? '', heads, ...members]
    return Number(await this.#op('materialise', () => this.#eval(MATERIALISE, [key], args))) === 1
  }

  async #size(key: string): Promise<{ entries: number; bytes: number } | undefined> {
    const res = await this.#client
      .multi()
      .call('MEMORY', 'USAGE', key, 'SAMPLES', '0')
      .zcard(key)
      .zrange(key, -1, -1)
      .exec()
    const bytes = reply<number | null>(res, 0)
    if (bytes === null) return undefined
    const [state] = reply<string[]>(res, 2)
    const ghost = state === TRUNCATED || state === WARMING_T ? 1 : 0
    return { entries: reply<number>(res, 1) - 1 - ghost, bytes }
  }
}

/** Activation log entries read per call. */
const ACTIVATIONS_PER_READ = 10_000

/** Orders two Redis stream ids (`<ms>-<seq>`). */
export function compareStreamIds(a: string, b: string): number {
  const [am = 0, as = 0] = a.split('-').map(Number)
  const [bm = 0, bs = 0] = b.split('-').map(Number)
  return am - bm || as - bs
}

/** A script call refused because Redis no longer holds the script (restarted, failed over). */
const isNoScript = (err: unknown): boolean =>
  err instanceof Error && err.message.startsWith('NOSCRIPT')

/** Script calls in flight at once for a batch. */
const PARALLEL = 4
/** Errors of a multi-key call whose keys turned out not to share a node (or an auto-pipeline). */
const ROUTING_ERROR = /^(MOVED|ASK|CROSSSLOT|TRYAGAIN)|redirections|non local key|same slot/

const floorOf = (opts: PageOptions): string | undefined =>
  opts.atLeast ? encodeMember(opts.atLeast) : undefined

/** The low end of a page's range: the floor (inclusive), or the bottom. */
const floorBound = (opts: PageOptions): string => {
  const floor = floorOf(opts)
  return floor === undefined ? '-' : `[${floor}`
}

function removeArgs(target: string | TimelineItem): string[] {
  if (typeof target !== 'string') return ['m', encodeMember(target)]
  const { post, repost } = feedUriFields(target)
  return ['u', post, repost]
}

/** One reply of a MULTI; a failed transaction or command rejects. */
function reply<T>(res: [Error | null, unknown][] | null, i: number): T {
  if (!res) throw new Error('transaction aborted')
  const [err, value] = res[i] ?? [new Error('missing reply'), undefined]
  if (err) throw err
  return value as T
}

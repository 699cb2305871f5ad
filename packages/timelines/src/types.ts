// The store's vocabulary. An item is one feed_item row reduced to what GetTimeline answers and
// what its order and cursor need; everything else is hydrated by the AppView.

export interface TimelineItem {
  /** The post (feed_item.postUri). */
  uri: string
  /** The repost record when the feed item is a repost (feed_item.uri). */
  repost?: string
  /** feed_item.sortAt, exactly as stored: the stock orders by this string. */
  sortAt: string
  /** feed_item.cid: the repost's cid when the item is a repost. */
  cid: string
}

/** A decoded `<epoch-ms>__<cid>` cursor: the same shape as the server's TimeKey. */
export interface TimeKey {
  /** ISO time of the cursor's epoch-ms (`new Date(ms).toISOString()`). */
  time: string
  key: string
}

export interface PageOptions {
  limit: number
  /** Only items strictly older than this (sortAt, cid) position, as the stock's keyset does. */
  before?: TimeKey
  /**
   * Only items at or above this one's position. A merge that already holds `limit` items down to
   * it needs nothing older, so lists are read (and shipped) only down to there.
   */
  atLeast?: TimelineItem
}

export interface StorePage {
  /** Newest first, at most `limit`. */
  items: TimelineItem[]
  /**
   * True when `items` are exactly what an untrimmed list would give. False when the list was
   * trimmed (or rebuilt from a bounded read) and the page ran into the trimmed part: the caller
   * must answer this page from Postgres.
   */
  complete: boolean
}

export interface AuthorPage extends StorePage {
  /** Authors whose list is not materialised (never seeded, evicted, flushed): seed them. */
  missing: string[]
}

/**
 * A page as the lists hold it: members (member.ts), newest first, undecoded. A home page is merged
 * on these and decodes only what it answers.
 */
export interface MemberPage {
  members: string[]
  /** As StorePage.complete. */
  complete: boolean
}

export interface AuthorMembers extends MemberPage {
  /** As AuthorPage.missing. */
  missing: string[]
}

/** What one home timeline page reads from the store (see TimelineStore.home), as members. */
export interface HomeRead {
  /** The reader's timeline, as `page` gives it; null when not materialised. */
  timeline: MemberPage | null
  /**
   * The reader's own recent items, as `authorRecent([reader])` gives them; with celebrities to
   * read and a materialised timeline, down to the same floor as theirs (a page's merge admits no
   * own item below `limit` followed ones).
   */
  own: AuthorMembers
  /**
   * The followed celebrities' items, as `authorRecent` gives them down to the timeline page's
   * last item when the timeline filled the page; undefined when there are none to read or the
   * timeline is not materialised.
   */
  celebrities: AuthorMembers | undefined
  /**
   * The celebrities' lists this read named, and how many of them were answered from a copy the
   * process keeps of their top instead of read (a single Redis's first pages; see redis-store.ts).
   */
  copies?: { named: number; used: number }
}

export interface MaterialiseOptions {
  /**
   * True when `items` are all of the list's items. False when they are the newest rows of a
   * bounded read: the oldest one then only marks where knowledge ends and is not stored, so read
   * one row more than you want kept.
   */
  complete: boolean
  /**
   * The token `startRebuild` gave: the list is written only while that rebuild still holds it. A
   * removal or eviction reaching the list meanwhile, or the lease running out, cancels it.
   */
  token?: string
}

/** New readers' activations, as read from the store's activation log. */
export interface Activations {
  /** Where the next read resumes. */
  next: string
  readers: string[]
  /** Entries were trimmed away unread: re-read the whole activity index instead. */
  gap: boolean
}

export interface MemoryStats {
  backend: 'redis' | 'memory'
  /** Redis: used_memory summed over the masters. In process: an estimate of the lists' bytes. */
  usedBytes: number
  /** Readers in the activity index. */
  activeReaders: number
  /** Over the sampled readers' timelines: how many exist, their entries, the bytes their keys take. */
  sample: { lists: number; entries: number; bytes: number }
}

export interface TimelineStoreOptions {
  /** Entries kept per reader timeline; older ones are trimmed. */
  targetLength?: number
  /** Entries kept per celebrity list. */
  authorTargetLength?: number
}

export const DEFAULT_TARGET_LENGTH = 500
/**
 * How long a rebuild may hold its list: longer than the Postgres statement timeout of the read
 * behind it, so a live rebuild never loses its lease; a crashed one frees it after this.
 */
export const DEFAULT_REBUILD_LEASE_MS = 60_000
export const DEFAULT_AUTHOR_TARGET_LENGTH = 500

/**
 * The lists a store keeps: a reader's home `timeline`, and an `author`'s recent items (merged into
 * their followers' pages at read time: celebrities, and readers' own items).
 */
export type ListKind = 'timeline' | 'author'

/**
 * Fan-out timelines. Two implementations behave identically: RedisTimelineStore (single Redis or
 * Cluster) and MemoryTimelineStore (embedded mode). Redis failures reject with
 * TimelineStoreUnavailable; anything else is a caller error.
 */
export interface TimelineStore {
  readonly targetLength: number
  readonly authorTargetLength: number

  /**
   * Writes the item into the timelines of those readers that are materialised. Returns how many
   * took it (on Cluster, while slots migrate, the count may fall short; the timelines are right).
   */
  fanOut(readers: readonly string[], item: TimelineItem): Promise<number>
  /** Writes several items into one materialised timeline (e.g. a new follow's recent posts). */
  insert(reader: string, items: readonly TimelineItem[]): Promise<number>
  /** Removes a feed item (by its feed uri: the repost's for a repost, or the exact item). */
  remove(readers: readonly string[], target: string | TimelineItem): Promise<number>
  /** Removes every item originated by `did` (its posts and its reposts): unfollow, block. */
  removeOriginator(readers: readonly string[], did: string): Promise<number>
  /** Items after the cursor, newest first; null when the reader's timeline is not materialised. */
  page(reader: string, opts: PageOptions): Promise<StorePage | null>

  /**
   * Everything one home timeline page reads (the timeline, the reader's own list and the
   * celebrities' lists), in one round trip where the backend allows it: a single Redis does, a
   * Cluster spreads the lists over nodes and takes two.
   */
  home(reader: string, celebrities: readonly string[], opts: PageOptions): Promise<HomeRead>

  isMaterialised(reader: string): Promise<boolean>
  /** Whether the reader's timeline is materialised or being rebuilt (it takes fan-out writes). */
  hasList(reader: string): Promise<boolean>
  /**
   * Clears the list and starts collecting fan-out writes before a rebuild reads Postgres, so
   * nothing committed during the rebuild is lost. For a reader's timeline it also records the
   * reader as active and appends it to the activation log, so the fan-out writer includes it
   * from here on (every author list takes writes). Not materialised until `materialise`. Returns
   * the rebuild's token, or undefined when another rebuild of this list (in any process sharing
   * the store) holds it for up to `leaseMs`.
   */
  startRebuild(kind: ListKind, key: string, leaseMs?: number): Promise<string | undefined>
  /**
   * Replaces the list (merging writes collected since `startRebuild`) and marks it materialised.
   * False when the rebuild was cancelled (see MaterialiseOptions.token).
   */
  materialise(
    kind: ListKind,
    key: string,
    items: readonly TimelineItem[],
    opts: MaterialiseOptions,
  ): Promise<boolean>
  /** A rebuild that failed gives its lease back (and its half-built list). */
  abandonRebuild(kind: ListKind, key: string, token: string): Promise<void>
  /**
   * Readers that started a rebuild after `after` (a position from an earlier call), oldest first;
   * with `after` undefined, only the current end of the log.
   */
  activations(after: string | undefined): Promise<Activations>
  /**
   * Takes a named lease for `ms` if no one holds it: work that one process of many sharing the
   * store should do per period (hibernation) goes to whoever gets it.
   */
  tryLease(name: string, ms: number): Promise<boolean>
  /** Drops timelines now; they rebuild on their next read. */
  evict(readers: readonly string[]): Promise<void>

  /** Drops authors' recent lists now; they are seeded again when next read. */
  evictAuthors(authors: readonly string[]): Promise<void>

  /** Adds a celebrity's item to its recent list, if the list is materialised. */
  pushAuthorRecent(author: string, item: TimelineItem): Promise<boolean>
  removeAuthorRecent(author: string, target: string | TimelineItem): Promise<number>
  /** The merged recent items of the authors after the cursor, newest first. */
  authorRecent(authors: readonly string[], opts: PageOptions): Promise<AuthorPage>

  /** Records that the reader is active at `at` (epoch ms; never moves backwards). */
  touch(reader: string, at?: number): Promise<void>
  /** Readers active at or after `since` (epoch ms). */
  activeSince(since: number): Promise<string[]>
  /**
   * Drops the timelines (and own recent lists) of readers last active before `before` and forgets
   * them. Returns how many.
   */
  evictInactive(before: number): Promise<number>

  /** Memory in use, and the exact size of the sampled readers' timelines. */
  memoryStats(sample?: readonly string[]): Promise<MemoryStats>
  close(): Promise<void>
}

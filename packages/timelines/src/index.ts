export {
  DEFAULT_AUTHOR_TARGET_LENGTH,
  DEFAULT_REBUILD_LEASE_MS,
  DEFAULT_TARGET_LENGTH,
  type Activations,
  type AuthorPage,
  type AuthorMembers,
  type HomeRead,
  type ListKind,
  type MemberPage,
  type MaterialiseOptions,
  type MemoryStats,
  type PageOptions,
  type StorePage,
  type TimeKey,
  type TimelineItem,
  type TimelineStore,
  type TimelineStoreOptions,
} from './types.ts'
export { TimelineStoreUnavailable, TimeoutError } from './errors.ts'
export { MemoryTimelineStore, type MemoryTimelineStoreOptions } from './memory-store.ts'
export {
  compareStreamIds,
  DEFAULT_CELEBRITY_COPIES,
  RedisTimelineStore,
  type RedisTimelineStoreOptions,
} from './redis-store.ts'
export {
  createRedisClient,
  parseRedisNodes,
  waitForRedis,
  type RedisClient,
  type RedisClientOptions,
  type RedisNode,
} from './redis-client.ts'
export {
  cursorOf,
  feedRowFromItem,
  itemFromFeedRow,
  mergeHome,
  type FeedRow,
  type MergedPage,
  type MergeInput,
} from './merge.ts'
export { lossyKeep, seededRandom } from './lossy.ts'
export { decodeMember, encodeMember, memberCursor, memberUris } from './member.ts'
export { MemberItems } from './member-items.ts'

// @openplane/graph: the follow graph in memory as roaring bitmaps, over DIDs interned to u32 ids
// that are persisted in Postgres; loaded from the stock `follow` table or from a snapshot.
export { ActorIds } from './actor-ids.ts'
export {
  Graph,
  type Actor,
  type FollowsFollowing,
  type LoadedGraph,
  type LoadOptions,
  type RestoredGraph,
} from './graph.ts'
export { RoaringBitmap32, type ReadonlyRoaringBitmap32 } from './roaring.ts'
export { SetStore, type SetRecord } from './set-store.ts'
export type { SnapshotMeta } from './snapshot-store.ts'

// @openplane/fanout: the graph and fan-out timelines kept current from the indexer's committed
// changes, and home timelines answered from them (Postgres when they cannot answer exactly).
export { Celebrities } from './celebrities.ts'
export { FanOut, type FanOutOptions, type FanOutTargets } from './fanout.ts'
export { openGraph, snapshotGraph } from './graph-start.ts'
export {
  GraphFeedReader,
  GraphFeedWriter,
  lastEntry,
  type GraphFeedEntry,
  type GraphFeedOptions,
  type GraphOp,
} from './graph-feed.ts'
export { GraphFollower, type GraphFollowerOptions } from './graph-follower.ts'
export { HomeTimelines, type HomeMembers, type HomeOptions, type HomePage } from './home.ts'
export type { FeedSource } from './source.ts'

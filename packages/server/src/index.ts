export { allowList, DEFAULT_LIMITS, type ConnectionLimits } from './listener.ts'
export {
  DEFAULT_MAX_REQUEST_BYTES,
  startServer,
  type DataplaneServer,
  type HealthReport,
  type ServerOptions,
} from './server.ts'
export {
  buildRoutes,
  implementedMethods,
  type FollowGraph,
  type HomeTimelineReader,
  type RouteContext,
  type Routes,
} from './routes/index.ts'
export { followedItems, ownItems, timelineFromPostgres } from './routes/util/timeline-sql.ts'
export { feedItemBytes } from './wire/feed-items.ts'
export { timelineFrame } from './wire/timeline.ts'

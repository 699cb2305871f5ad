export type { CommitOp, IngestEvent } from './events.ts'
export { decodeFrame, decodeFrameReference, type FrameResult } from './frames.ts'
export { decodeChecked, reviveCids } from './decoder.ts'
export { Indexer, type IndexerOptions, type IndexerState, type SourceGap } from './indexer.ts'
export {
  BACKFILL_SOURCE,
  Writer,
  type CommitListener,
  type RepoChunk,
  type RepoFinish,
} from './writer.ts'
export type { WriterDeps } from './deps.ts'
export { checkRecords } from './checks.ts'
export { writerDeps } from './deps.ts'
export { lookupThread, type LookupSetup, type LookupThread } from './lookup-thread.ts'
export type { Change, FeedItemValues } from './changes.ts'
export { IdentityPrefetch, type PrefetchOptions } from './identity-prefetch.ts'
export type { Scope } from './scope.ts'
export { HOLD_DEFAULTS, type HoldLimits } from './repo-gate.ts'
export { threadCpuSeconds } from './stages.ts'
export { WorkerExits } from './worker-exits.ts'
export { READY, terminateWhenReady, whenLoaded, whenReady } from './worker-ready.ts'
export { hashMatches, openCar, sameBytes, signedCommit } from './commit-block.ts'
export { messageOf, type Applied } from './publish.ts'
export { keepPublishedWindow, type WindowOptions } from './publish-window.ts'

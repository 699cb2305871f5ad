// @openplane/sim: the performance toolkit. Userbases (power-law follow graphs) generated in
// bounded memory and bulk-loaded in the stock dataplane schema; scenarios and simulation plans.
export { cidFor, didFor, handleFor, idForDid, tid } from './ids.ts'
export {
  DEFAULT_EPOCH,
  DEFAULT_HANDLE_DOMAIN,
  MAX_USERS,
  parsePlan,
  parseScenarioParams,
  parseUserbaseParams,
  type ExistingPosts,
  type FollowsTier,
  type PlanEntry,
  type PostsTier,
  type ScenarioKind,
  type ScenarioParams,
  type SessionsTier,
  type UserbaseParams,
} from './params.ts'
export { followersOf, tierIndex, totalFollows } from './powerlaw.ts'
export { hash32, mix32, Rng } from './rng.ts'
export {
  buildFollowerModel,
  followGraph,
  sampleFollowers,
  type FollowerModel,
  type SubjectFollowers,
} from './userbase.ts'
export {
  formatStats,
  inDegrees,
  measureUserbase,
  percentiles,
  type MeasureOptions,
  type Percentiles,
  type UserbaseStats,
} from './stats.ts'
export {
  byOffset,
  mergeScenarios,
  parseScenario,
  scenarioChunks,
  serializeScenario,
  type FollowEvent,
  type PostEvent,
  type Scenario,
  type SessionEvent,
} from './scenario.ts'
export { DAY_MS, generateScenario, generateScenarios } from './generate.ts'
export {
  TABLES,
  writeUserbaseRows,
  type RowCounts,
  type RowSink,
  type RowSinks,
  type Table,
} from './rows.ts'
export { formatLoadReport, loadUserbase, type LoadOptions, type LoadReport } from './load.ts'
export { formatCount, progressReporter, type ProgressFn } from './progress.ts'
export {
  checkFile,
  detectKind,
  readPlan,
  readScenario,
  readScenarioParams,
  readUserbaseParams,
  writeScenario,
  type FileKind,
} from './files.ts'
export { ParamError } from './validate.ts'
export {
  checkCommitFrame,
  LocalNetwork,
  type CheckedCommit,
  type EmitOptions,
  type Emitted,
  type LocalNetworkOptions,
  type PostOptions,
} from './emit/index.ts'
export * from './run/index.ts'
export * from './report/index.ts'
export {
  ACTIONS,
  CorpusRepos,
  CorpusReader,
  CorpusWriter,
  DEFAULT_FIREHOSE,
  DEFAULT_MIX,
  drainFirehose,
  FirehoseGenerator,
  GENERATOR_VERSION,
  JetstreamView,
  mixShares,
  parseFirehoseParams,
  postText,
  recordFirehose,
  ReplayServer,
  VOCABULARY,
  wantedBy,
  wordAt,
  type Action,
  type CorpusHeader,
  type CorpusSummary,
  type FirehoseParams,
  type Mix,
  type ReplayStatus,
} from './corpus/index.ts'

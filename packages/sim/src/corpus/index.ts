export {
  CorpusReader,
  CorpusWriter,
  wsBinaryFrame,
  wsHeaderLength,
  type CorpusHeader,
  type CorpusSummary,
} from './file.ts'
export { postText, VOCABULARY, wordAt } from './words.ts'
export {
  FirehoseGenerator,
  GENERATOR_VERSION,
  type ActionCounts,
  type RepoOp,
  type Step,
} from './generate.ts'
export {
  ACTIONS,
  DEFAULT_FIREHOSE,
  DEFAULT_MIX,
  mixShares,
  parseFirehoseParams,
  type Action,
  type FirehoseParams,
  type Mix,
} from './params.ts'
export { recordFirehose, type RecordOptions } from './record.ts'
export { ReplayServer, type ReplayOptions, type ReplayStatus } from './replay.ts'
export { CorpusRepos } from './repos.ts'
export { JetstreamView, wantedBy } from './jetstream.ts'
export { drainFirehose, type DrainResult } from './drain.ts'

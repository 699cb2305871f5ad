export type * from './types.ts'
export { NO_EFFECTS } from './types.ts'
export { InvalidRecordError } from './lexicon.ts'
export { indexedCollections, plugins, pluginFor, parseRecord } from './registry.ts'

export { Backfill } from './backfill.ts'
export {
  BACKFILL_DEFAULTS,
  type BackfillOptions,
  type BackfillStats,
  type DidDocs,
} from './options.ts'
export { RepoTable, type RepoCounts } from './repos.ts'
export { indexedRecords, type IndexedRepo } from './reconcile.ts'
export { fetchRepo, RepoFetchError } from './fetch-repo.ts'
export { readRepoCar, RepoCarError } from './car.ts'
export { listRepos, listReposByCollection, parseDidList, readDidList } from './enumerate.ts'
export {
  GapRepair,
  GAP_CLOCK_MARGIN_MS,
  tidTime,
  type GapRepairState,
  type GapToRepair,
} from './gap-repair.ts'

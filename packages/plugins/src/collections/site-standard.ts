// site.standard.* (publications, documents, …) come from another lexicon family that @atproto/api
// does not ship; they are stored as-is in `record` (objects only) for GetSiteStandardRecords*.
import { InvalidRecordError } from '../lexicon.ts'
import type { RecordPlugin } from '../types.ts'

const cache = new Map<string, RecordPlugin<unknown, never>>()

export function siteStandard(collection: string): RecordPlugin<unknown, never> {
  let plugin = cache.get(collection)
  if (!plugin) {
    plugin = {
      collection,
      table: null,
      parse(record) {
        if (!record || typeof record !== 'object' || Array.isArray(record)) {
          throw new InvalidRecordError(`invalid ${collection} record: not an object`)
        }
        return record
      },
      toRow: () => {
        throw new Error(`${collection} has no table`)
      },
      onInsert: () => ({}),
      onDelete: () => ({}),
    }
    cache.set(collection, plugin)
  }
  return plugin
}

// Every collection the indexer understands. Adding a record type: write its plugin file in
// collections/, list it here (see CONTRIBUTING.md).
import { like } from './collections/like.ts'
import {
  chatDeclaration,
  germDeclaration,
  notificationDeclaration,
  status,
} from './collections/record-only.ts'
import { siteStandard } from './collections/site-standard.ts'
import type { RecordPlugin, TableName } from './types.ts'

type AnyPlugin = RecordPlugin<unknown, TableName>

export const plugins: AnyPlugin[] = [
  like,
  chatDeclaration,
  germDeclaration,
  notificationDeclaration,
  status,
] as AnyPlugin[]

const byCollection = new Map(plugins.map((p) => [p.collection, p]))

export function pluginFor(collection: string): AnyPlugin | undefined {
  const exact = byCollection.get(collection)
  if (exact) return exact
  // site.standard.* records are kept in `record` for GetSiteStandardRecords*, whatever their type.
  if (collection.startsWith('site.standard.')) return siteStandard(collection) as AnyPlugin
  return undefined
}

/** Lexicon-checks a stored record again (used when promoting a duplicate). */
export function parseRecord(collection: string, record: unknown): unknown {
  const plugin = pluginFor(collection)
  if (!plugin) throw new Error(`no plugin for ${collection}`)
  return plugin.parse(record)
}

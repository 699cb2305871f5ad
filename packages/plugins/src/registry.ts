// Every collection the indexer understands. Adding a record type: write its plugin file in
// collections/, list it here (see CONTRIBUTING.md).
import { block } from './collections/block.ts'
import { feedGenerator } from './collections/feed-generator.ts'
import { follow } from './collections/follow.ts'
import { labeler } from './collections/labeler.ts'
import { like } from './collections/like.ts'
import { listBlock } from './collections/list-block.ts'
import { listItem } from './collections/list-item.ts'
import { list } from './collections/list.ts'
import { postGate } from './collections/post-gate.ts'
import { post } from './collections/post.ts'
import { profile } from './collections/profile.ts'
import {
  chatDeclaration,
  germDeclaration,
  notificationDeclaration,
  status,
} from './collections/record-only.ts'
import { referenceListOptOut } from './collections/reference-list-opt-out.ts'
import { repost } from './collections/repost.ts'
import { siteStandard } from './collections/site-standard.ts'
import { starterPack } from './collections/starter-pack.ts'
import { threadGate } from './collections/thread-gate.ts'
import { verification } from './collections/verification.ts'
import type { RecordPlugin, TableName } from './types.ts'

type AnyPlugin = RecordPlugin<unknown, TableName>

export const plugins: AnyPlugin[] = [
  post,
  threadGate,
  postGate,
  like,
  repost,
  follow,
  profile,
  list,
  listItem,
  referenceListOptOut,
  listBlock,
  block,
  feedGenerator,
  starterPack,
  labeler,
  verification,
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

/**
 * The collections the index keeps, as a stream filter takes them (Jetstream's
 * wantedCollections: exact NSIDs, or a prefix ending in `.*`).
 */
export function indexedCollections(): string[] {
  return [...byCollection.keys(), 'site.standard.*']
}

/** Lexicon-checks a stored record again (used when promoting a duplicate). */
export function parseRecord(collection: string, record: unknown): unknown {
  const plugin = pluginFor(collection)
  if (!plugin) throw new Error(`no plugin for ${collection}`)
  return plugin.parse(record)
}

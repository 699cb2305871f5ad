// Row changes of a batch that other stores follow (the graph, fan-out timelines, a community's
// membership), handed to listeners only after the batch commits, so they never see a change that
// was rolled back.
import type { Selectable } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'

type Row<T extends keyof DatabaseSchema> = Selectable<DatabaseSchema[T]>

export type Change =
  | { table: 'follow'; op: 'insert' | 'delete'; row: Row<'follow'> }
  /** A list item: membership of community lists follows it. */
  | { table: 'list_item'; op: 'insert' | 'delete'; row: Row<'list_item'> }
  /** A feed item (post or repost) was written: fan it out. */
  | { table: 'feed_item'; op: 'insert'; row: FeedItemValues }
  /** A feed item was removed. */
  | { table: 'feed_item'; op: 'delete'; row: FeedItemValues }

export interface FeedItemValues {
  type: string
  uri: string
  cid: string
  postUri: string
  originatorDid: string
  sortAt: string
}

export const WATCHED = new Set(['follow', 'list_item', 'feed_item'])

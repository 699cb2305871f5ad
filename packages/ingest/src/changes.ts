// Row changes of a batch that other stores follow (the graph, fan-out timelines), handed to
// listeners only after the batch commits, so they never see a change that was rolled back.
import type { Selectable } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'

type Row<T extends keyof DatabaseSchema> = Selectable<DatabaseSchema[T]>

export type Change =
  | { table: 'follow'; op: 'insert' | 'delete'; row: Row<'follow'> }
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

export const WATCHED = new Set(['follow', 'feed_item'])

export class ChangeLog {
  private list: Change[] = []

  add(change: Change): void {
    this.list.push(change)
  }

  snapshot(): () => void {
    const n = this.list.length
    return () => void (this.list.length = n)
  }

  take(): Change[] {
    const out = this.list
    this.list = []
    return out
  }
}

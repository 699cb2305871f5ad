import type { ServiceImpl } from '@connectrpc/connect'
import type { Kysely } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'
import type { Identity } from '@openplane/identity'
import type { Service } from '@openplane/proto'
import type { FeedItemRow } from './util/feed-item.ts'
import type { TimeKey } from './util/pagination.ts'

export interface RouteContext {
  db: Kysely<DatabaseSchema>
  identity: Identity
  /** Fan-out home timelines; GetTimeline answers from Postgres without them, or when they decline. */
  timelines?: HomeTimelineReader
  /** The in-memory follow graph, when this process keeps one current. */
  graph?: FollowGraph
}

export interface HomeTimelineReader {
  /** A page under the stock's rules, or undefined when Postgres must answer it. */
  read(
    reader: string,
    limit: number,
    before: TimeKey | undefined,
  ): Promise<{ items: FeedItemRow[]; cursor: string } | undefined>
}

export interface FollowGraph {
  followsFollowing(
    viewer: string,
    targets: readonly string[],
  ): { targetDid: string; dids: string[] }[]
  isFollowing(actor: string, subject: string): boolean
}

export type Routes = Partial<ServiceImpl<typeof Service>>

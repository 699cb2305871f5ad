import type { ServiceImpl } from '@connectrpc/connect'
import type { Kysely } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'
import type { Identity } from '@openplane/identity'
import type { Service } from '@openplane/proto'
import type { FeedItemBytes } from '../wire/feed-items.ts'
import type { FeedItemOut } from './util/feed-item.ts'
import type { TimeKey } from './util/pagination.ts'

export interface RouteContext {
  db: Kysely<DatabaseSchema>
  identity: Identity
  /** Fan-out home timelines; GetTimeline answers from Postgres without them, or when they decline. */
  timelines?: HomeTimelineReader
  /** The in-memory follow graph, when this process keeps one current. */
  graph?: FollowGraph
  /**
   * How posts and actors are searched: `substring` as the stock does (the default here), or
   * `fulltext` (routes/util/search-fulltext.ts).
   */
  search?: SearchMode
}

export type SearchMode = 'substring' | 'fulltext'

export interface HomeTimelineReader {
  /** A page under the stock's rules, as answered, or undefined when Postgres must answer it. */
  read(
    reader: string,
    limit: number,
    before: TimeKey | undefined,
  ): Promise<{ items: FeedItemOut[]; cursor: string } | undefined>
  /** The same page with its items as bytes to write, for the answer's frame (../wire/timeline.ts). */
  readItems(
    reader: string,
    limit: number,
    before: TimeKey | undefined,
  ): Promise<{ items: FeedItemBytes; cursor: string } | undefined>
}

/**
 * The in-memory follow graph, for which follows exist. (GetFollowsFollowing stays in SQL: its
 * answer lists dids in the plan's row order, which the AppView's "known followers" shows and a
 * bitmap cannot reproduce.)
 */
export interface FollowGraph {
  isFollowing(actor: string, subject: string): boolean
}

export type Routes = Partial<ServiceImpl<typeof Service>>

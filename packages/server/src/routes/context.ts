import type { Message, MessageType } from '@bufbuild/protobuf'
import type { ServiceImpl } from '@connectrpc/connect'
import type { Kysely } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'
import type { Identity } from '@openplane/identity'
import type { Service } from '@openplane/proto'
import type { FeedItemBytes, FeedItemOut } from './util/feed-item.ts'
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
  /** The same page with its items as bytes to write, for the answer's frame (timeline-wire.ts). */
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

/**
 * An rpc the direct lane (../direct.ts) answers without Connect: it decodes the request and
 * returns the whole answer as a gRPC frame. Only for the hottest reads, each also served by its
 * Connect route with the same answer.
 */
export interface DirectRoute {
  /** The method's name, as metrics and logs give it. */
  name: string
  /** The request message; throws on bytes that are not one. */
  decode(bytes: Uint8Array): Message
  answer(req: Message): Promise<Uint8Array>
  /**
   * Counted against the lane's in-flight bound (DATAPLANE_MAX_TIMELINE_READS): reads whose work
   * is this process's CPU and Redis, where a burst queues inside the process.
   */
  bounded?: boolean
}

/** A direct route for a method whose request type is `input`. */
export function directRoute<I extends Message<I>>(
  name: string,
  input: MessageType<I>,
  answer: (req: I) => Promise<Uint8Array>,
  bounded = false,
): DirectRoute {
  return {
    name,
    decode: (bytes) => input.fromBinary(bytes),
    answer: (req) => answer(req as I),
    bounded,
  }
}

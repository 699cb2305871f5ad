// The Get*Records rpcs: raw records by uri, positional, each rpc limited to its own collection.
// GetPostRecords adds per-post gate flags and, on request, the threads' canonical OP reply chains.
import type { PlainMessage } from '@bufbuild/protobuf'
import { sql, type Kysely } from 'kysely'
import { anyOf, type DatabaseSchema } from '@openplane/db'
import type { OpThread, PostRecordMeta } from '@openplane/proto'
import type { RouteContext, Routes } from './context.ts'
import { collectionOf } from './util/at-uri.ts'
import { canonicalOpThread, type OpReplyRow } from './util/op-thread.ts'
import { recordEntries, recordsOf, type RecordEntry, type RecordRow } from './util/records.ts'

type Db = Kysely<DatabaseSchema>

export default (ctx: RouteContext): Routes => ({
  getBlockRecords: recordsOf(ctx.db, 'app.bsky.graph.block'),
  getFeedGeneratorRecords: recordsOf(ctx.db, 'app.bsky.feed.generator'),
  getFollowRecords: recordsOf(ctx.db, 'app.bsky.graph.follow'),
  getLikeRecords: recordsOf(ctx.db, 'app.bsky.feed.like'),
  getListBlockRecords: recordsOf(ctx.db, 'app.bsky.graph.listblock'),
  getListItemRecords: recordsOf(ctx.db, 'app.bsky.graph.listitem'),
  getListRecords: recordsOf(ctx.db, 'app.bsky.graph.list'),
  getProfileRecords: recordsOf(ctx.db, 'app.bsky.actor.profile'),
  getActorChatDeclarationRecords: recordsOf(ctx.db, 'chat.bsky.actor.declaration'),
  getNotificationDeclarationRecords: recordsOf(ctx.db, 'app.bsky.notification.declaration'),
  getGermDeclarationRecords: recordsOf(ctx.db, 'com.germnetwork.declaration'),
  getStatusRecords: recordsOf(ctx.db, 'app.bsky.actor.status'),
  getRepostRecords: recordsOf(ctx.db, 'app.bsky.feed.repost'),
  getThreadGateRecords: recordsOf(ctx.db, 'app.bsky.feed.threadgate'),
  getPostgateRecords: recordsOf(ctx.db, 'app.bsky.feed.postgate'),
  getLabelerRecords: recordsOf(ctx.db, 'app.bsky.labeler.service'),
  getStarterPackRecords: recordsOf(ctx.db, 'app.bsky.graph.starterpack'),

  async getPostRecords(req) {
    const [{ records, meta }, opThreads] = await Promise.all([
      postsWithMeta(ctx.db, req.uris),
      req.includeOpThreadMetadata ? opThreadsFor(ctx.db, req.uris) : [],
    ])
    return { records, meta, opThreads }
  },
})

const POST = 'app.bsky.feed.post'

type PostRow = RecordRow & {
  /** The record row exists (the uri's other columns may come from `post` alone). */
  hasRecord: boolean
  violatesThreadGate: boolean | null
  violatesEmbeddingRules: boolean | null
  hasThreadGate: boolean | null
  hasPostGate: boolean | null
}

/**
 * The posts' records and gate flags in one query: each requested uri looked up in `record` (a
 * post record only, as every Get*Records rpc keeps to its collection) and in `post` (every uri,
 * as the stock looks them all up there).
 */
async function postsWithMeta(
  db: Db,
  uris: string[],
): Promise<{ records: RecordEntry[]; meta: PlainMessage<PostRecordMeta>[] }> {
  // A malformed uri is refused before anything is read, as getRecords refuses it.
  const posts = new Set(uris.filter((uri) => collectionOf(uri) === POST))
  const unique = [...new Set(uris)]
  const rows = unique.length
    ? (
        await sql<PostRow>`
          select u.uri, r.cid, r.json, r."indexedAt", r."takedownRef", r.tags,
            r.uri is not null as "hasRecord",
            p."violatesThreadGate", p."violatesEmbeddingRules", p."hasThreadGate", p."hasPostGate"
          from unnest(${unique}::text[]) as u(uri)
          left join record r on r.uri = u.uri
          left join post p on p.uri = u.uri
          where r.uri is not null or p.uri is not null`.execute(db)
      ).rows
    : []
  const byUri = new Map(rows.map((row) => [row.uri, row]))
  const meta = uris.map((uri) => {
    const row = byUri.get(uri)
    return {
      violatesThreadGate: !!row?.violatesThreadGate,
      hasMedia: false,
      isReply: false,
      violatesEmbeddingRules: !!row?.violatesEmbeddingRules,
      hasPostGate: !!row?.hasPostGate,
      hasThreadGate: !!row?.hasThreadGate,
      hasVideo: false,
    }
  })
  const records = recordEntries(
    uris,
    rows.filter((row) => row.hasRecord && posts.has(row.uri)),
  )
  return { records, meta }
}

// The OP reply chains of the threads the requested posts belong to, one per thread that has any.
async function opThreadsFor(db: Db, uris: string[]): Promise<PlainMessage<OpThread>[]> {
  const unique = [...new Set(uris)]
  if (!unique.length) return []
  const roots = db
    .selectFrom('post')
    .where('uri', '=', anyOf(unique))
    .select((eb) => eb.fn.coalesce('replyRoot', 'uri').as('rootUri'))
    .distinct()
  const rows = await db
    .selectFrom('op_thread_reply')
    .innerJoin(roots.as('root'), 'root.rootUri', 'op_thread_reply.rootUri')
    .select([
      'op_thread_reply.rootUri',
      'op_thread_reply.uri',
      'op_thread_reply.parentUri',
      'op_thread_reply.deletedAt',
    ])
    .execute()
  const byRoot = new Map<string, OpReplyRow[]>()
  for (const row of rows) {
    const replies = byRoot.get(row.rootUri) ?? []
    replies.push(row)
    byRoot.set(row.rootUri, replies)
  }
  const threads: PlainMessage<OpThread>[] = []
  for (const [rootUri, replies] of byRoot) {
    const chain = canonicalOpThread(rootUri, replies)
    if (chain) threads.push({ rootUri, uris: chain })
  }
  return threads
}

import { sql, type Kysely } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'
import type { RouteContext, Routes } from './context.ts'
import { canonicalOpThread } from './util/op-thread.ts'

export default (ctx: RouteContext): Routes => ({
  // The anchor and its ancestors (nearest first), then its descendants newest first; the AppView
  // builds the tree from the records. All three queries run at once.
  async getThread(req) {
    const [ancestors, descendants, opThread] = await Promise.all([
      ancestorsAndSelf(ctx.db, req.postUri, req.above),
      descendantsOf(ctx.db, req.postUri, req.below),
      opThreadOf(ctx.db, req.postUri),
    ])
    return { uris: [...ancestors, ...descendants], opThread: opThread ?? [] }
  },
})

/** The post itself (if indexed) and up to `above` parents; the height bound guards against cycles. */
async function ancestorsAndSelf(
  db: Kysely<DatabaseSchema>,
  uri: string,
  above: number,
): Promise<string[]> {
  const rows = await db
    .withRecursive('ancestor(uri, ancestorUri, height)', (qc) =>
      qc
        .selectFrom('post')
        .select(['post.uri as uri', 'post.replyParent as ancestorUri', sql<number>`0`.as('height')])
        .where('post.uri', '=', uri)
        .unionAll(
          qc
            .selectFrom('post')
            .innerJoin('ancestor', 'ancestor.ancestorUri', 'post.uri')
            .where('ancestor.height', '<', above)
            .select([
              'post.uri as uri',
              'post.replyParent as ancestorUri',
              sql<number>`ancestor.height + 1`.as('height'),
            ]),
        ),
    )
    .selectFrom('ancestor')
    .select('ancestor.uri')
    // A chain yields one row per height, so this is the order the stock's scan returns.
    .orderBy('ancestor.height', 'asc')
    .execute()
  return rows.map((r) => r.uri)
}

/** Replies down to `below` levels (walks post_replyparent_idx), newest first as the stock sorts. */
async function descendantsOf(
  db: Kysely<DatabaseSchema>,
  uri: string,
  below: number,
): Promise<string[]> {
  const rows = await db
    .withRecursive('descendent(uri, depth)', (qc) =>
      qc
        .selectFrom('post')
        .select(['post.uri as uri', sql<number>`1`.as('depth')])
        .where(sql<number>`1`, '<=', below)
        .where('post.replyParent', '=', uri)
        .unionAll(
          qc
            .selectFrom('post')
            .innerJoin('descendent', 'descendent.uri', 'post.replyParent')
            .where('descendent.depth', '<', below)
            .select(['post.uri as uri', sql<number>`descendent.depth + 1`.as('depth')]),
        ),
    )
    .selectFrom('descendent')
    .innerJoin('post', 'post.uri', 'descendent.uri')
    .select('descendent.uri')
    .orderBy('post.sortAt', 'desc')
    .execute()
  return rows.map((r) => r.uri)
}

/**
 * The OP thread of the anchor's thread. The root is the anchor's reply root, or the anchor
 * itself when it is a root or not indexed; resolving it in the same query saves a round trip.
 */
async function opThreadOf(
  db: Kysely<DatabaseSchema>,
  postUri: string,
): Promise<string[] | undefined> {
  const rows = await db
    .selectFrom('op_thread_reply')
    .select(['rootUri', 'uri', 'parentUri', 'deletedAt'])
    .where('rootUri', '=', (eb) =>
      eb.fn.coalesce(
        eb.selectFrom('post').select('post.replyRoot').where('post.uri', '=', postUri),
        eb.val(postUri),
      ),
    )
    .execute()
  const rootUri = rows[0]?.rootUri
  return rootUri ? canonicalOpThread(rootUri, rows) : undefined
}

// Actor rows: handles (verified both ways, with the stock's contention rule), upstream account
// status, and the removal of a deleted account's whole index.
import { sql, type Kysely, type Selectable } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'

type Db = Kysely<DatabaseSchema>

const HOUR = 60 * 60_000
const DAY = 24 * HOUR

/** The stock re-checks a handle daily, and hourly while it is invalid. */
export function needsHandleReindex(
  actor: { handle: string | null; indexedAt: string } | undefined,
  time: string,
): boolean {
  if (!actor) return true
  const diff = new Date(time).getTime() - new Date(actor.indexedAt).getTime()
  return diff > DAY || (actor.handle === null && diff > HOUR)
}

/** Writes the actor's handle; a verified handle held by another actor is taken from it. */
export async function setHandle(
  db: Db,
  did: string,
  handle: string | null,
  time: string,
): Promise<void> {
  if (handle !== null) {
    await db
      .updateTable('actor')
      .set({ handle: null })
      .where('handle', '=', handle)
      .where('did', '!=', did)
      .execute()
  }
  await db
    .insertInto('actor')
    .values({ did, handle, indexedAt: time })
    .onConflict((oc) => oc.column('did').doUpdateSet({ handle, indexedAt: time }))
    .execute()
}

export class AccountStatusError extends Error {}

export async function setUpstreamStatus(
  db: Db,
  did: string,
  active: boolean,
  status: string | undefined,
): Promise<void> {
  let upstreamStatus: string | null = null
  if (!active) {
    if (!status || !['deactivated', 'suspended', 'takendown'].includes(status)) {
      throw new AccountStatusError(`unrecognized account status: ${status ?? '(none)'}`)
    }
    upstreamStatus = status
  }
  await db.updateTable('actor').set({ upstreamStatus }).where('did', '=', did).execute()
}

// Like the stock, a deleted account's rows go without counter recounts on other actors' rows.
const BY_CREATOR = [
  'profile',
  'follow',
  'repost',
  'like',
  'feed_generator',
  'labeler',
  'list_item',
  'reference_list_opt_out',
  'list',
  'actor_block',
  'list_block',
] as const
const EMBEDS = [
  'post_embed_image',
  'post_embed_external',
  'post_embed_record',
  'post_embed_video',
  'post_embed_gallery_image',
] as const

/** Returns the follows it removed, for the stores that follow the graph. */
export async function deleteAccount(
  db: Db,
  did: string,
): Promise<Selectable<DatabaseSchema['follow']>[]> {
  await db.deleteFrom('actor').where('did', '=', did).execute()
  let follows: Selectable<DatabaseSchema['follow']>[] = []
  for (const table of BY_CREATOR) {
    if (table === 'follow') {
      follows = await db.deleteFrom('follow').where('creator', '=', did).returningAll().execute()
      continue
    }
    await db.deleteFrom(table).where('creator', '=', did).execute()
  }
  const posts = db.selectFrom('post').where('post.creator', '=', did).select('post.uri')
  for (const table of EMBEDS) {
    await db.deleteFrom(table).where('postUri', 'in', posts).execute()
  }
  await db.deleteFrom('post').where('creator', '=', did).execute()
  await db.deleteFrom('thread_gate').where('creator', '=', did).execute()
  await db.deleteFrom('post_gate').where('creator', '=', did).execute()
  await db.deleteFrom('notification').where('author', '=', did).execute()
  await db
    .deleteFrom('duplicate_record')
    .where('duplicateOf', 'in', db.selectFrom('record').where('did', '=', did).select('uri'))
    .execute()
  await db.deleteFrom('record').where('did', '=', did).execute()
  await db.deleteFrom('notification').where('did', '=', did).execute()
  return follows
}

/** actor_sync: the last commit seen per repo (read by GetLatestRev). */
export async function setCommitsLastSeen(
  db: Db,
  seen: Map<string, { commit: string; rev: string }>,
): Promise<void> {
  if (!seen.size) return
  const rows = [...seen].map(([did, s]) => ({ did, commitCid: s.commit, repoRev: s.rev || null }))
  await db
    .insertInto('actor_sync')
    .values(rows)
    .onConflict((oc) =>
      oc.column('did').doUpdateSet({
        commitCid: sql.ref('excluded.commitCid'),
        repoRev: sql.ref('excluded.repoRev'),
      }),
    )
    .execute()
}

// Actor rows: handles (verified both ways, with the stock's contention rule), upstream account
// status, and the removal of a deleted account's whole index.
import { sql, type Kysely, type Selectable } from 'kysely'
import { eachValue, textArray, type DatabaseSchema } from '@openplane/db'
import type { Counter } from '@openplane/plugins'

type Db = Kysely<DatabaseSchema>

const HOUR = 60 * 60_000
const DAY = 24 * HOUR

/** The stock re-checks a handle daily, and hourly while it is invalid. */
export function needsHandleReindex(
  actor: { handle: string | null; indexedAt: string } | undefined,
  time: string,
): boolean {
  if (!actor) return true
  // Date.parse: asked for most events of every batch, and a Date object each time was garbage.
  const diff = Date.parse(time) - Date.parse(actor.indexedAt)
  return diff > DAY || (actor.handle === null && diff > HOUR)
}

/**
 * The handle and check time of each of `dids` that has an actor row, probed did by did through
 * the primary key (eachValue): as `did = any($1)`, Postgres took a batch's 1,800 DIDs against
 * 90,000 actors for a sequential scan, 32 ms a batch. The probes cost a little more than a scan
 * of a small table, far less than one of a large.
 */
export async function readActors(
  db: Db,
  dids: readonly string[],
): Promise<{ did: string; handle: string | null; indexedAt: string }[]> {
  if (!dids.length) return []
  const probe = sql`select did, handle, "indexedAt" from actor where did = u.v`
  const { rows } = await sql<{ did: string; handle: string | null; indexedAt: string }>`
    select a.did, a.handle, a."indexedAt" from ${eachValue(dids, probe, 'a')}
  `.execute(db)
  return rows
}

// The stock's unindexActor: every table of the account's own records; `quote` and `feed_item`
// rows stay, as they do in the stock. (batch/absent.ts relies on these going with the account.)
export const BY_CREATOR = [
  'profile',
  'feed_generator',
  'labeler',
  'reference_list_opt_out',
  'list',
  'actor_block',
  'list_block',
] as const
export const EMBEDS = [
  'post_embed_image',
  'post_embed_external',
  'post_embed_record',
  'post_embed_video',
  'post_embed_gallery_image',
] as const

export interface DeletedAccount {
  /** The follows it removed, for the stores that follow the graph. */
  follows: Selectable<DatabaseSchema['follow']>[]
  /** The list items it removed, for a community's membership. */
  listItems: Selectable<DatabaseSchema['list_item']>[]
  /**
   * What the removed rows had added to counters, taken off again: the stock leaves those counts
   * stale until something recounts them; here they stay equal to the rows.
   */
  counters: Counter[]
}

/** Removes a deleted account's index in one statement per table. */
export async function deleteAccount(db: Db, did: string): Promise<DeletedAccount> {
  const counters = new Tally()
  await db.deleteFrom('actor').where('did', '=', did).execute()
  const follows = await db.deleteFrom('follow').where('creator', '=', did).returningAll().execute()
  for (const f of follows) {
    counters.add('profile_agg', f.subjectDid, 'followersCount')
    counters.add('profile_agg', did, 'followsCount')
  }
  for (const [table, column] of [
    ['like', 'likeCount'],
    ['repost', 'repostCount'],
  ] as const) {
    const gone = await db
      .deleteFrom(table)
      .where('creator', '=', did)
      .returning('subject')
      .execute()
    for (const row of gone) counters.add('post_agg', row.subject, column)
  }
  const listItems = await db
    .deleteFrom('list_item')
    .where('creator', '=', did)
    .returningAll()
    .execute()
  for (const table of BY_CREATOR) await db.deleteFrom(table).where('creator', '=', did).execute()
  const posts = db.selectFrom('post').where('post.creator', '=', did).select('post.uri')
  for (const table of EMBEDS) {
    await db.deleteFrom(table).where('postUri', 'in', posts).execute()
  }
  const gone = await db
    .deleteFrom('post')
    .where('creator', '=', did)
    .returning(['replyParent', 'violatesThreadGate'])
    .execute()
  for (const p of gone) {
    counters.add('profile_agg', did, 'postsCount')
    if (p.replyParent && !p.violatesThreadGate)
      counters.add('post_agg', p.replyParent, 'replyCount')
  }
  await db.deleteFrom('thread_gate').where('creator', '=', did).execute()
  await db.deleteFrom('post_gate').where('creator', '=', did).execute()
  await db.deleteFrom('notification').where('author', '=', did).execute()
  await db
    .deleteFrom('duplicate_record')
    .where('duplicateOf', 'in', db.selectFrom('record').where('did', '=', did).select('uri'))
    .execute()
  await db.deleteFrom('record').where('did', '=', did).execute()
  await db.deleteFrom('notification').where('did', '=', did).execute()
  return { follows, listItems, counters: counters.decrements() }
}

/**
 * What a purge removes beyond an account deletion. The stock leaves a deleted account's feed items
 * and last commit (nothing more comes from it); an account purged from a community leaves no
 * rows, and its feed items leave timelines at once.
 */
export async function purgeLeftovers(
  db: Db,
  did: string,
): Promise<Selectable<DatabaseSchema['feed_item']>[]> {
  await db.deleteFrom('actor_sync').where('did', '=', did).execute()
  return db.deleteFrom('feed_item').where('originatorDid', '=', did).returningAll().execute()
}

/** Removed rows per counter key. */
class Tally {
  private readonly counts = new Map<string, Counter>()

  add(table: Counter['table'], key: string, column: Counter['column']): void {
    const id = `${table} ${column} ${key}`
    const c = this.counts.get(id)
    if (c) c.delta--
    else this.counts.set(id, { table, key, column, delta: -1 } as Counter)
  }

  decrements(): Counter[] {
    return [...this.counts.values()]
  }
}

/** actor_sync: the last commit seen per repo (read by GetLatestRev). */
export async function setCommitsLastSeen(
  db: Db,
  seen: Map<string, { commit: string; rev: string }>,
): Promise<void> {
  if (!seen.size) return
  const dids: string[] = []
  const commits: string[] = []
  const revs: (string | null)[] = []
  for (const [did, s] of seen) {
    dids.push(did)
    commits.push(s.commit)
    revs.push(s.rev || null)
  }
  // Three array parameters whatever the count (each DID once: `seen` is keyed by it). As a
  // VALUES list, a batch's thousands of repos made a statement of thousands of parameters to
  // build, send and plan, its text new each batch: 4.5 µs of Postgres an event, 3.4 as arrays.
  await sql`
    insert into actor_sync (did, "commitCid", "repoRev")
    select * from unnest(${textArray(dids)}::text[], ${textArray(commits)}::text[],
      ${textArray(revs)}::text[])
    on conflict (did) do update set
      -- Jetstream carries no commit CID (empty): the one known stays.
      "commitCid" = coalesce(nullif(excluded."commitCid", ''), actor_sync."commitCid"),
      "repoRev" = excluded."repoRev"
  `.execute(db)
}

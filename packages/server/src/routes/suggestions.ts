import { randomInt } from 'node:crypto'
import { sql, type Kysely } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'
import type { RouteContext, Routes } from './context.ts'

type Db = Kysely<DatabaseSchema>

/** Suggestions relative to an account come in one page of at most this many. */
const RELATIVE_LIMIT = 10
/** How many of the relative account's latest likes decide whom it likes most. */
const RECENT_LIKES = 1000

export default (ctx: RouteContext): Routes => ({
  async getFollowSuggestions(req) {
    return req.relativeToDid
      ? suggestionsRelativeTo(ctx.db, req.actorDid, req.relativeToDid, req.cursor, req.limit)
      : suggestionsGlobal(ctx.db, req.cursor, req.limit)
  },

  // Every tagged suggestion, in one unpaged response.
  async getSuggestedEntities() {
    const entities = await ctx.db
      .selectFrom('tagged_suggestion')
      .select(['tag', 'subject', 'subjectType'])
      .execute()
    return { entities }
  },
})

/**
 * The curated suggested_follow list: orders 1 and 2 always lead, the rest are shuffled. The
 * cursor lists every order already served (`3:1:7…`); a zero limit means all that remain.
 */
async function suggestionsGlobal(db: Db, cursor: string, limit: number) {
  const served = parseServed(cursor)
  const rows = await db
    .selectFrom('suggested_follow')
    .innerJoin('actor', 'actor.did', 'suggested_follow.did')
    .$if(served.length > 0, (qb) => qb.where('suggested_follow.order', 'not in', served))
    .select(['suggested_follow.did', 'suggested_follow.order'])
    .orderBy('suggested_follow.order', 'asc')
    .execute()
  const pinned = rows.filter((r) => r.order === 1 || r.order === 2)
  const rest = shuffle(rows.filter((r) => r.order !== 1 && r.order !== 2))
  const picked = [...pinned, ...rest].slice(0, limit || undefined)
  const next = picked.length > 0 ? [...picked.map((r) => r.order), ...served].join(':') : ''
  return { dids: picked.map((r) => r.did), cursor: next }
}

/** Orders in a global-suggestions cursor; anything unreadable is skipped, as the stock does. */
function parseServed(cursor: string): number[] {
  if (!cursor) return []
  return cursor
    .split(':')
    .map((s) => Number.parseInt(s, 10))
    .filter((n) => !Number.isNaN(n))
}

function shuffle<T>(items: T[]): T[] {
  const out = [...items]
  for (let i = out.length - 1; i > 0; i--) {
    const j = randomInt(i + 1)
    ;[out[i], out[j]] = [out[j] as T, out[i] as T]
  }
  return out
}

/**
 * Accounts the relative account liked most among its latest likes, not followed by the actor,
 * topped up from the curated list. One page only: any cursor means no more.
 *
 * (The stock also tries "popular accounts the actor follows that the actor does not follow",
 * which is always empty; that query is skipped.)
 */
async function suggestionsRelativeTo(
  db: Db,
  actorDid: string,
  relativeToDid: string,
  cursor: string,
  requested: number,
) {
  if (cursor) return { dids: [] }
  const limit = requested ? Math.min(RELATIVE_LIMIT, requested) : RELATIVE_LIMIT
  const followedByActor = db
    .selectFrom('follow')
    .where('creator', '=', actorDid)
    .select('subjectDid')
  const liked = await db
    .selectFrom(
      db
        .selectFrom('like')
        .where('creator', '=', relativeToDid)
        .select(sql<string>`split_part(subject, '/', 3)`.as('subjectDid'))
        .orderBy('sortAt', 'desc')
        .limit(RECENT_LIKES)
        .as('likes'),
    )
    .where('likes.subjectDid', 'not in', followedByActor)
    .where('likes.subjectDid', 'not in', [actorDid, relativeToDid])
    .select((eb) => ['likes.subjectDid as did', eb.fn.count('likes.subjectDid').as('count')])
    .groupBy('likes.subjectDid')
    .orderBy('count', 'desc')
    .limit(limit)
    .execute()
  const dids = liked.map((r) => r.did)
  if (dids.length >= limit) return { dids }

  // Topped up with every curated suggestion not yet included or followed (not capped at the
  // limit, as in the stock), in curated order.
  const curated = await db
    .selectFrom('suggested_follow')
    .where('did', 'not in', [...dids, actorDid, relativeToDid])
    .where('did', 'not in', followedByActor)
    .select('did')
    .orderBy('order', 'asc')
    .execute()
  return { dids: [...dids, ...curated.map((r) => r.did)] }
}

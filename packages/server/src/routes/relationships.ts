// Relationships: the viewer's mutes, blocks and follows towards each of a batch of actors, and
// whether blocks (direct or via list) exist between pairs of actors.
import { sql, type Kysely, type RawBuilder } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'
import type { RouteContext, Routes } from './context.ts'
import { graphFor } from './util/graph.ts'
import { anyOf } from './util/any-of.ts'

type Db = Kysely<DatabaseSchema>

export default (ctx: RouteContext): Routes => ({
  // Only actors the index knows get a relationship; unknown ones answer all-empty.
  async getRelationships(req) {
    if (req.targetDids.length === 0) return { relationships: [] }
    const rows = await relationshipRows(ctx, req.actorDid, [...new Set(req.targetDids)])
    const byDid = new Map(rows.map((row) => [row.did, row]))
    const relationships = req.targetDids.map((did) => {
      const row = byDid.get(did)
      const muteOnlyReposts = row?.muteOnlyReposts ?? null
      const muteOnlyQuoteposts = row?.muteOnlyQuoteposts ?? null
      return {
        // No mute row at all leaves both scope columns null.
        muted: muteOnlyReposts !== null && !muteOnlyReposts && !muteOnlyQuoteposts,
        mutedOnlyReposts: muteOnlyReposts ?? false,
        mutedOnlyQuoteposts: muteOnlyQuoteposts ?? false,
        mutedByList: row?.mutedByList ?? '',
        blockedBy: row?.blockedBy ?? '',
        blocking: row?.blocking ?? '',
        blockedByList: row?.blockedByList ?? '',
        blockingByList: row?.blockingByList ?? '',
        following: row?.following ?? '',
        followedBy: row?.followedBy ?? '',
      }
    })
    return { relationships }
  },

  async getBlockExistence(req) {
    if (req.pairs.length === 0) return { exists: [], blocks: [] }
    const rows = await blockRows(ctx.db, req.pairs)
    // Keyed by the unordered pair, last row wins: with both (a, b) and (b, a) requested, both
    // answer from the later one's point of view, exactly as the stock does.
    const byPair = new Map(rows.map((row) => [pairKey(row.source, row.target), row]))
    const found = req.pairs.map((pair) => byPair.get(pairKey(pair.a, pair.b)))
    return {
      exists: found.map(
        (row) => !!(row?.blocking || row?.blockedBy || row?.blockingByList || row?.blockedByList),
      ),
      blocks: found.map((row) => ({
        blockedBy: row?.blockedBy || '',
        blocking: row?.blocking || '',
        blockedByList: row?.blockedByList || '',
        blockingByList: row?.blockingByList || '',
      })),
    }
  },
})

const pairKey = (a: string, b: string) => [a, b].sort().join(',')

// Several lists can name the same actor; the stock's scalar subqueries fail outright then, so
// we report one of them (the least uri, to stay deterministic).
function listVia(
  joinTable: 'list_mute' | 'list_block',
  where: RawBuilder<unknown>,
): RawBuilder<string | null> {
  const on =
    joinTable === 'list_mute' ? sql`j."listUri" = li."listUri"` : sql`j."subjectUri" = li."listUri"`
  return sql<string | null>`(select min(li."listUri") from list_item li
    join ${sql.table(joinTable)} j on ${on} where ${where})`
}

function relationshipRows(ctx: RouteContext, viewer: string, targets: string[]) {
  // The graph knows which follows exist; Postgres only looks up the uris of those.
  const graph = graphFor(ctx, 'getRelationships')
  const onlyWhere = (follows: (target: string) => boolean, lookup: RawBuilder<string | null>) => {
    if (!graph) return lookup
    const which = targets.filter(follows)
    return which.length
      ? sql<string | null>`case when actor.did = any(${which}::varchar[]) then ${lookup} end`
      : sql<string | null>`null::varchar`
  }
  return ctx.db
    .selectFrom('actor')
    .where('actor.did', '=', anyOf(targets))
    .select([
      'actor.did',
      sql<boolean | null>`(select m."onlyReposts" from mute m
        where m."mutedByDid" = ${viewer} and m."subjectDid" = actor.did)`.as('muteOnlyReposts'),
      sql<boolean | null>`(select m."onlyQuoteposts" from mute m
        where m."mutedByDid" = ${viewer} and m."subjectDid" = actor.did)`.as('muteOnlyQuoteposts'),
      listVia('list_mute', sql`j."mutedByDid" = ${viewer} and li."subjectDid" = actor.did`).as(
        'mutedByList',
      ),
      sql<string | null>`(select b.uri from actor_block b
        where b.creator = ${viewer} and b."subjectDid" = actor.did)`.as('blocking'),
      sql<string | null>`(select b.uri from actor_block b
        where b.creator = actor.did and b."subjectDid" = ${viewer})`.as('blockedBy'),
      listVia('list_block', sql`j.creator = ${viewer} and li."subjectDid" = actor.did`).as(
        'blockingByList',
      ),
      listVia('list_block', sql`j.creator = actor.did and li."subjectDid" = ${viewer}`).as(
        'blockedByList',
      ),
      onlyWhere(
        (t) => graph!.isFollowing(viewer, t),
        sql<string | null>`(select f.uri from follow f
          where f.creator = ${viewer} and f."subjectDid" = actor.did)`,
      ).as('following'),
      onlyWhere(
        (t) => graph!.isFollowing(t, viewer),
        sql<string | null>`(select f.uri from follow f
          where f.creator = actor.did and f."subjectDid" = ${viewer})`,
      ).as('followedBy'),
    ])
    .execute()
}

interface BlockRow {
  source: string
  target: string
  blocking: string | null
  blockedBy: string | null
  blockingByList: string | null
  blockedByList: string | null
}

// One row per requested pair, in request order; each probes the block indexes for its pair.
async function blockRows(db: Db, pairs: { a: string; b: string }[]): Promise<BlockRow[]> {
  const values = sql.join(pairs.map((p, i) => sql`(${i}::int, ${p.a}::varchar, ${p.b}::varchar)`))
  const { rows } = await sql<BlockRow>`
    select
      pair.source,
      pair.target,
      (select b.uri from actor_block b
        where b.creator = pair.source and b."subjectDid" = pair.target) as blocking,
      (select b.uri from actor_block b
        where b.creator = pair.target and b."subjectDid" = pair.source) as "blockedBy",
      (select min(li."listUri") from list_item li join list_block j on j."subjectUri" = li."listUri"
        where j.creator = pair.source and li."subjectDid" = pair.target) as "blockingByList",
      (select min(li."listUri") from list_item li join list_block j on j."subjectUri" = li."listUri"
        where j.creator = pair.target and li."subjectDid" = pair.source) as "blockedByList"
    from (values ${values}) as pair (i, source, target)
    order by pair.i
  `.execute(db)
  return rows
}

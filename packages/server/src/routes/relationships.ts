// Relationships: the viewer's mutes, blocks and follows towards each of a batch of actors, and
// whether blocks (direct or via list) exist between pairs of actors.
import { sql, type Kysely } from 'kysely'
import { anyOf, type DatabaseSchema } from '@openplane/db'
import type { RouteContext, Routes } from './context.ts'
import { graphFor } from './util/graph.ts'

type Db = Kysely<DatabaseSchema>

export default (ctx: RouteContext): Routes => ({
  // Only actors the index knows get a relationship; unknown ones answer all-empty.
  async getRelationships(req) {
    if (req.targetDids.length === 0) return { relationships: [] }
    const byDid = await relationshipsOf(ctx, req.actorDid, [...new Set(req.targetDids)])
    const relationships = req.targetDids.map((did) => {
      const row = byDid.get(did)
      // No mute row at all leaves both scopes unset.
      const mute = row?.mute
      return {
        muted: !!mute && !mute.onlyReposts && !mute.onlyQuoteposts,
        mutedOnlyReposts: mute?.onlyReposts ?? false,
        mutedOnlyQuoteposts: mute?.onlyQuoteposts ?? false,
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

/** What the index holds between the viewer and one known actor. */
interface Relationship {
  mute?: { onlyReposts: boolean; onlyQuoteposts: boolean }
  mutedByList?: string
  blocking?: string
  blockedBy?: string
  blockingByList?: string
  blockedByList?: string
  following?: string
  followedBy?: string
}

type Kind = keyof Relationship | 'actor'

interface KindRow {
  kind: Kind
  did: string
  uri: string | null
  onlyReposts: boolean | null
  onlyQuoteposts: boolean | null
}

/**
 * One statement for the whole batch: each relationship is one index scan over all targets
 * (`= any($targets)`), not a subquery per target and relationship as the stock runs (nine per
 * target: at 40 targets, 0.99 ms of execution against 0.41 ms this way). Rows come back tagged
 * with what they are; targets missing from `actor` get nothing.
 *
 * Several lists can name the same actor; the stock's scalar subqueries fail outright then, so
 * we report one of them (the least uri, to stay deterministic).
 */
async function relationshipsOf(
  ctx: RouteContext,
  viewer: string,
  targets: string[],
): Promise<Map<string, Relationship>> {
  // The graph knows which follows exist; Postgres only looks up the uris of those.
  const graph = graphFor(ctx, 'getRelationships')
  const following = graph ? targets.filter((t) => graph.isFollowing(viewer, t)) : targets
  const followedBy = graph ? targets.filter((t) => graph.isFollowing(t, viewer)) : targets
  const all = anyOf(targets)
  const { rows } = await sql<KindRow>`
    select 'actor' as kind, a.did, null::varchar as uri,
        null::boolean as "onlyReposts", null::boolean as "onlyQuoteposts"
      from actor a where a.did = ${all}
    union all
    select 'mute', m."subjectDid", null, m."onlyReposts", m."onlyQuoteposts"
      from mute m where m."mutedByDid" = ${viewer} and m."subjectDid" = ${all}
    union all
    select 'mutedByList', li."subjectDid", min(li."listUri"), null, null
      from list_mute j join list_item li on li."listUri" = j."listUri"
      where j."mutedByDid" = ${viewer} and li."subjectDid" = ${all}
      group by li."subjectDid"
    union all
    select 'blocking', b."subjectDid", b.uri, null, null
      from actor_block b where b.creator = ${viewer} and b."subjectDid" = ${all}
    union all
    select 'blockedBy', b.creator, b.uri, null, null
      from actor_block b where b."subjectDid" = ${viewer} and b.creator = ${all}
    union all
    select 'blockingByList', li."subjectDid", min(li."listUri"), null, null
      from list_block j join list_item li on li."listUri" = j."subjectUri"
      where j.creator = ${viewer} and li."subjectDid" = ${all}
      group by li."subjectDid"
    union all
    select 'blockedByList', j.creator, min(li."listUri"), null, null
      from list_item li join list_block j on j."subjectUri" = li."listUri"
      where li."subjectDid" = ${viewer} and j.creator = ${all}
      group by j.creator
    union all
    select 'following', f."subjectDid", f.uri, null, null
      from follow f where f.creator = ${viewer} and f."subjectDid" = ${anyOf(following)}
    union all
    select 'followedBy', f.creator, f.uri, null, null
      from follow f where f."subjectDid" = ${viewer} and f.creator = ${anyOf(followedBy)}
  `.execute(ctx.db)
  const known = new Map<string, Relationship>()
  for (const row of rows) if (row.kind === 'actor') known.set(row.did, {})
  for (const row of rows) {
    const rel = known.get(row.did)
    if (!rel || row.kind === 'actor') continue
    if (row.kind === 'mute')
      rel.mute = { onlyReposts: !!row.onlyReposts, onlyQuoteposts: !!row.onlyQuoteposts }
    else rel[row.kind] = row.uri ?? undefined
  }
  return known
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

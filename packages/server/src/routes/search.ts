import type { RouteContext, Routes } from './context.ts'
import { searchActorsFulltext, searchPostsFulltext } from './util/search-fulltext.ts'
import {
  searchActorsSql,
  searchFeedGeneratorsSql,
  searchPostsSql,
  searchStarterPacksSql,
  type SearchPage,
  type SearchRequest,
} from './util/search-sql.ts'

/** V2 searches without an explicit limit default to 25, as the stock's do. */
const V2_LIMIT = 25
const TYPEAHEAD_LIMIT = 10

type Search = (db: RouteContext['db'], req: SearchRequest) => Promise<SearchPage>

// The V2 rpcs answer from the same SQL as V1: scores are 0, totals unknown (0), and the filters
// beyond an author are not applied, as in the stock.
const scored = <K extends 'uri' | 'did'>(key: K, values: string[]) =>
  values.map((v) => ({ [key]: v, score: 0 }) as Record<K, string> & { score: number })
const pageInfo = (cursor: string) => ({ cursor, hitsTotal: 0n })

export default (ctx: RouteContext): Routes => {
  // Posts and actors by full-text search, or by substring as the stock does; starter packs and
  // feed generators by substring either way.
  const fulltext = ctx.search === 'fulltext'
  const posts: Search = fulltext ? searchPostsFulltext : searchPostsSql
  const actors: Search = fulltext ? searchActorsFulltext : searchActorsSql
  return {
    async searchActors(req) {
      const { results, cursor } = await actors(ctx.db, req)
      return { dids: results, cursor }
    },

    async searchPosts(req) {
      const { results, cursor } = await posts(ctx.db, req)
      return { uris: results, cursor }
    },

    async searchStarterPacks(req) {
      const { results, cursor } = await searchStarterPacksSql(ctx.db, req)
      return { uris: results, cursor }
    },

    async searchActorsV2(req) {
      const { results, cursor } = await actors(ctx.db, v2Request(req.params))
      return { actors: scored('did', results), pageInfo: pageInfo(cursor) }
    },

    // One page only: typeahead takes no cursor.
    async searchActorsTypeahead(req) {
      const { results } = await actors(ctx.db, {
        term: req.params?.query ?? '',
        limit: req.params?.limit || TYPEAHEAD_LIMIT,
      })
      return { actors: scored('did', results) }
    },

    // The first author filter becomes a `from:` clause of the query.
    async searchPostsV2(req) {
      const author = req.filters?.authors[0]
      const query = req.params?.query ?? ''
      const { results, cursor } = await posts(ctx.db, {
        ...v2Request(req.params),
        term: author ? `${query} from:${author}` : query,
      })
      return {
        posts: scored('uri', results),
        pageInfo: pageInfo(cursor),
        detectedQueryLanguages: [],
      }
    },

    async searchFeedGeneratorsV2(req) {
      const { results, cursor } = await searchFeedGeneratorsSql(ctx.db, v2Request(req.params))
      return { feedGenerators: scored('uri', results), pageInfo: pageInfo(cursor) }
    },

    async searchStarterPacksV2(req) {
      const { results, cursor } = await searchStarterPacksSql(ctx.db, v2Request(req.params))
      return { starterPacks: scored('uri', results), pageInfo: pageInfo(cursor) }
    },
  }
}

/** Without params the limit is 25; with params their limit is taken as is (0 is an empty page). */
function v2Request(params: { query: string; limit: number; cursor: string } | undefined) {
  return {
    term: params?.query ?? '',
    limit: params ? params.limit : V2_LIMIT,
    cursor: params?.cursor ?? '',
  }
}

// Search that finds what people look for (DATAPLANE_SEARCH=fulltext): posts by their words with
// Postgres full-text search (the document and its GIN index: @openplane/db migration 0009 and
// search-index.ts), with the app's operators (search-query.ts); actors by handle and display
// name with trigram word similarity, for typeahead. Posts come newest first with the stock's
// cursor; taken-down posts and accounts are never returned (a deleted post has no row).
import { sql, type Kysely, type RawBuilder, type SqlBool } from 'kysely'
import { PLAN_PER_CALL, type DatabaseSchema } from '@openplane/db'
import { before, decodeTimeKey, encodeTimeKey, malformedCursor, page } from './pagination.ts'
import { parsePostQuery, splitUnquoted, type PostQuery } from './search-query.ts'
import { didOfHandle, type SearchPage, type SearchRequest } from './search-sql.ts'
import { commonLexemes, lexemesOf, rareEnough } from './search-stats.ts'
import { pageSize } from './stock-cursors.ts'

type Db = Kysely<DatabaseSchema>
type Condition = RawBuilder<SqlBool>

const NOTHING: SearchPage = { results: [], cursor: '' }
const DOCUMENT = sql`openplane_post_document(post.text, post.langs)`

/**
 * The windows of time, back from the newest post (or the cursor), a page is looked for in, one
 * after another until it is full: ten minutes, an hour, a day, a week, then all the rest.
 */
const WINDOWS_MS = [10 * 60_000, 3_600_000, 86_400_000, 7 * 86_400_000, Infinity]

type Match = { uri: string; cid: string; sortAt: string; creator: string }
/** How common a query's words are: see postConditions. */
type Share = { value: number; posts: number; perMs: number; exact: boolean }

/**
 * The most posts a one-word query may expect to walk, newest first, to fill its page (the page
 * over the word's share of posts): a word at least this common is looked for by walking each
 * window by time and stopping at the page (a word in one post of fifteen: 26 pages' posts in
 * about 400); a rarer one has each window's matches found whole first.
 */
const WALK_ROWS = 1_000

/**
 * Newest first, window by window, because Postgres cannot tell how common a word is well enough
 * to choose between walking the newest posts (best for a common word) and the index (for a rare
 * one): its estimate for a rare word can be off a hundredfold, and walking a million posts for
 * it takes seconds, while all the matches of a word in one post of thirty cost it a hundred
 * milliseconds to fetch and sort. In a window of time either plan is cheap: a common word fills
 * the page within the first minutes, a rarer one within the day, and only a rare word (a few
 * matches, whichever plan) reaches back further.
 */
export async function searchPostsFulltext(db: Db, req: SearchRequest): Promise<SearchPage> {
  const at = decodeTimeKey(req.cursor)
  const limit = pageSize(req.limit)
  const query = parsePostQuery(req.term)
  const found = await postConditions(db, query)
  if (!found || !limit) return NOTHING
  const where = sql<SqlBool>`${sql.join(found.conditions, sql` and `)}`
  const { share } = found
  if (share && rareEnough(share.value, share.posts)) {
    return rarePage(db, where, at, limit)
  }
  const after = at ? before('post.sortAt', 'post.cid', at) : sql<SqlBool>`true`
  const walk = !!share?.exact && (limit + 1) / share.value <= WALK_ROWS
  const top =
    at?.time ??
    (
      await db
        .selectFrom('post')
        .select('post.sortAt')
        .orderBy('post.sortAt', 'desc')
        .limit(1)
        .executeTakeFirst()
    )?.sortAt
  if (top === undefined) return NOTHING
  const matches: Match[] = []
  let newer: string | undefined
  for (const span of WINDOWS_MS) {
    const want = limit + 1 - matches.length
    // A window the query's matches are not expected to fill is left to the next one, which
    // holds it: each window read the word's whole posting list again (19 ms for a word in 68,526
    // posts), so a word of middling share paid it three times before reaching its page.
    if (span !== Infinity && share?.perMs && share.value * share.perMs * span < want) continue
    const from = span === Infinity ? undefined : new Date(Date.parse(top) - span).toISOString()
    const inWindow = sql<SqlBool>`${where} and ${after}
      and ${from === undefined ? sql`true` : sql`post."sortAt" >= ${from}`}
      and ${newer === undefined ? sql`true` : sql`post."sortAt" < ${newer}`}`
    // Materialized: the window's matches first (through the index, or its posts), then the
    // newest of them; never a walk of every post by time. A common word walks the window by
    // time instead, stopping at the page: with the window's matches found first, an hour's
    // posts were read whole for the dozen the page still needed.
    const { rows } = walk
      ? await sql<Match>`
      select post.uri, post.cid, post."sortAt", post.creator from post where ${inWindow}
      order by post."sortAt" desc, post.cid desc limit ${want}
      ${sql.raw(PLAN_PER_CALL)}
    `.execute(db)
      : await sql<Match>`
      with found as materialized (
        select post.uri, post.cid, post."sortAt", post.creator from post where ${inWindow}
      )
      select * from found order by "sortAt" desc, cid desc limit ${want}
      ${sql.raw(PLAN_PER_CALL)}
    `.execute(db)
    matches.push(...rows)
    if (matches.length > limit || from === undefined) break
    newer = from
  }
  return pageOf(db, matches, limit)
}

/**
 * A query with a rare word (a few thousand matches at most: search-stats.ts): all its matches
 * through the index at once, then the newest of them.
 * Window by window, each window's posts would be walked by time and their documents computed,
 * to find nothing in most of them. The cursor applies to the matches, not inside, so that
 * Postgres has no order by time to walk.
 */
async function rarePage(
  db: Db,
  where: RawBuilder<SqlBool>,
  at: ReturnType<typeof decodeTimeKey>,
  limit: number,
): Promise<SearchPage> {
  const after = at ? before('found.sortAt', 'found.cid', at) : sql<SqlBool>`true`
  const { rows } = await sql<Match>`
    with found as materialized (
      select post.uri, post.cid, post."sortAt", post.creator from post where ${where}
    )
    select * from found where ${after} order by "sortAt" desc, cid desc limit ${limit + 1}
    ${sql.raw(PLAN_PER_CALL)}
  `.execute(db)
  return pageOf(db, rows, limit)
}

/** A page of matches (one more than the page, if there is more), taken-down posts left out. */
async function pageOf(db: Db, matches: Match[], limit: number): Promise<SearchPage> {
  const hidden = await takenDown(db, matches.slice(0, limit))
  const { items, cursor } = page(matches, limit, (r) => encodeTimeKey(r.sortAt, r.cid))
  return { results: items.filter((r) => !hidden.has(r.uri)).map((r) => r.uri), cursor }
}

/**
 * The page's taken-down posts (theirs, or their author's), looked up by key for the page alone:
 * as a condition of the search, Postgres would check every match (a word in a tenth of a
 * million posts) or scan for taken-down rows. A page may come short by its taken-down posts;
 * the cursor still moves past them.
 */
async function takenDown(db: Db, rows: Match[]): Promise<Set<string>> {
  if (!rows.length) return new Set()
  const uris = rows.map((r) => r.uri)
  const dids = [...new Set(rows.map((r) => r.creator))]
  const { rows: hidden } = await sql<{ uri: string }>`
    select p.uri from post p
    where p.uri = any(${uris}::text[]) and (
      exists (select 1 from record r where r.uri = p.uri and r."takedownRef" is not null)
      or exists (select 1 from actor a
        where a.did = p.creator and a.did = any(${dids}::text[]) and a."takedownRef" is not null))
  `.execute(db)
  return new Set(hidden.map((r) => r.uri))
}

/**
 * The query's conditions on `post`, and the share of posts its words can match at most, when
 * the index's statistics tell (see rarePage); `exact` when that share is the query's own (one
 * word and nothing else). Undefined when it can match nothing (no words and no operator, or an
 * account operator naming an account the index does not know).
 */
async function postConditions(
  db: Db,
  q: PostQuery,
): Promise<{ conditions: Condition[]; share: Share | undefined } | undefined> {
  const [author, to, mentions] = await Promise.all(
    [q.author, q.to, q.mentions].map((a) => (a ? didOf(db, a) : undefined)),
  )
  if ((q.author && !author) || (q.to && !to) || (q.mentions && !mentions)) return undefined
  const out: Condition[] = []
  const words = textQuery(q)
  let share: Share | undefined
  if (words) {
    // Worked out once (the word's forms in every language), not again in each window's plan;
    // with each word that bounds the matches (AND-ed, not excluded) on its own.
    const bounds = words.bounds.length ? words.bounds : [sql`''::tsquery`]
    const [{ rows }, common] = await Promise.all([
      sql<{ q: string; bounds: string[] }>`
        select (${words.query})::text as q,
          array[${sql.join(bounds.map((b) => sql`(${b})::text`))}] as bounds
      `.execute(db),
      commonLexemes(db),
    ])
    out.push(sql<SqlBool>`${DOCUMENT} @@ ${rows[0]!.q}::tsquery`)
    // A bounding word matches at most the posts of its forms (a form outside the common ones,
    // next to none; a word of stop words only, none at all); the query, its rarest word's.
    if (common && words.bounds.length) {
      const shares = rows[0]!.bounds.map((b) =>
        lexemesOf(b).reduce((sum, l) => sum + (common.frequency.get(l) ?? 0), 0),
      )
      const exact = words.bounds.length === 1 && rows[0]!.q === rows[0]!.bounds[0]
      share = { value: Math.min(...shares), posts: common.posts, perMs: common.perMs, exact }
    }
  }
  for (const tag of q.tags) out.push(hashtag(tag))
  if (author) out.push(sql<SqlBool>`post.creator = ${author}`)
  if (mentions) out.push(mentioning(mentions))
  if (to) {
    const parent = `at://${escapeLike(to)}/%`
    out.push(sql<SqlBool>`(post."replyParent" like ${parent} or ${mentioning(to)})`)
  }
  if (q.lang) {
    out.push(sql<SqlBool>`exists (
      select 1 from jsonb_array_elements_text(
        case when jsonb_typeof(post.langs) = 'array' then post.langs else '[]'::jsonb end
      ) l where lower(l) = ${q.lang} or lower(l) like ${`${q.lang}-%`})`)
  }
  if (q.since) out.push(sql<SqlBool>`post."sortAt" >= ${q.since}`)
  if (q.until) out.push(sql<SqlBool>`post."sortAt" < ${q.until}`)
  if (q.domain) out.push(linking(q.domain))
  if (share && out.length > 1) share = { ...share, exact: false }
  return out.length ? { conditions: out, share } : undefined
}

/**
 * The words as a tsquery, in websearch's grammar (terms AND-ed, `or` between them, `-term`
 * excluded, quoted phrases in order). Each word or phrase matches its forms in every language
 * (migration 0009's openplane_word_query): built term by term so that an excluded word excludes
 * all of them.
 */
function textQuery(
  q: PostQuery,
): { query: RawBuilder<unknown>; bounds: RawBuilder<unknown>[] } | undefined {
  const groups: RawBuilder<unknown>[][] = [[]]
  /** Per group, its terms that are not excluded: each bounds the group's matches. */
  const positive: RawBuilder<unknown>[][] = [[]]
  for (const token of splitUnquoted(q.text)) {
    if (token.toLowerCase() === 'or') {
      if (groups.at(-1)!.length) {
        groups.push([])
        positive.push([])
      }
      continue
    }
    const negated = token.startsWith('-') && token.length > 1
    const body = negated ? token.slice(1) : token
    const term = body.startsWith('"')
      ? sql`openplane_phrase_query(${body.replaceAll('"', '')})`
      : sql`openplane_word_query(${body})`
    groups.at(-1)!.push(negated ? sql`!!${term}` : term)
    if (!negated) positive.at(-1)!.push(term)
  }
  const filled = groups.filter((g) => g.length)
  if (!filled.length) return undefined
  const query = sql`(${sql.join(
    filled.map((g) => sql`(${sql.join(g, sql` && `)})`),
    sql` || `,
  )})`
  // Only a query of one group is bounded by its words: `a or b` matches either's posts.
  return { query, bounds: filled.length === 1 ? (positive.filter((p) => p.length)[0] ?? []) : [] }
}

/** A hashtag in the text (found through the index first), or in the record's `tags`. */
function hashtag(tag: string): Condition {
  const pattern = `(^|[^[:alnum:]_#])#${escapeRegex(tag)}($|[^[:alnum:]_])`
  return sql<SqlBool>`((${DOCUMENT} @@ openplane_word_query(${tag})
    and post.text ~* ${pattern}) or post.tags @> jsonb_build_array(${tag}::text))`
}

/** The post mentions the account (a mention facet, as its notification records it). */
function mentioning(did: string): Condition {
  return sql<SqlBool>`exists (select 1 from notification n
    where n."recordUri" = post.uri and n.reason = 'mention' and n.did = ${did})`
}

/** The post links to the host or a subdomain of it: its external embed, or a link in its text. */
function linking(domain: string): Condition {
  const host = `([a-z0-9-]+\\.)*${escapeRegex(domain)}`
  const inEmbed = `^[a-z][a-z0-9+.-]*://${host}([:/?#]|$)`
  const inText = `(^|[^a-z0-9.-])${host}([/:?#]|\\s|$)`
  return sql<SqlBool>`(exists (select 1 from post_embed_external e
    where e."postUri" = post.uri and lower(e.uri) ~ ${inEmbed}) or post.text ~* ${inText})`
}

const escapeRegex = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
/** A did:web may hold `%` (an encoded port): matched as itself in a LIKE pattern. */
const escapeLike = (s: string) => s.replace(/[\\%_]/g, '\\$&')

const didOf = (db: Db, account: string): Promise<string | undefined> =>
  account.startsWith('did:') ? Promise.resolve(account) : didOfHandle(db, account)

/**
 * Actors whose handle or display name holds a word like the term (trigram word similarity, which
 * ignores case: typing "ali" finds alice.test and "Alicia K."), or whose handle starts with it;
 * the most similar first. Both lookups use the stock's trigram indexes. The cursor is the count
 * of actors already given.
 */
export async function searchActorsFulltext(db: Db, req: SearchRequest): Promise<SearchPage> {
  const term = req.term.trim().replace(/^@/, '').toLowerCase()
  const limit = pageSize(req.limit)
  const offset = offsetOf(req.cursor)
  if (!term || !limit) return NOTHING
  const prefix = `${escapeLike(term)}%`
  const { rows } = await sql<{ did: string }>`
    with hits as (
      select did, word_similarity(${term}, handle) as score from actor
      where ${term} <% handle or handle like ${prefix}
      union all
      select creator, word_similarity(${term}, "displayName") from profile
      where ${term} <% "displayName"
    )
    select hits.did, max(hits.score) as score from hits
    join actor a on a.did = hits.did and a."takedownRef" is null
    group by hits.did
    order by score desc, hits.did
    offset ${offset} limit ${limit + 1}
  `.execute(db)
  const items = rows.slice(0, limit)
  return {
    results: items.map((r) => r.did),
    cursor: rows.length > limit ? String(offset + limit) : '',
  }
}

function offsetOf(cursor: string | undefined): number {
  if (!cursor) return 0
  if (!/^\d{1,9}$/.test(cursor)) throw malformedCursor()
  return Number(cursor)
}

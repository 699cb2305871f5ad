// Full-text search over posts (DATAPLANE_SEARCH=fulltext): the document a post is searched by,
// and the queries that search it, as functions an expression index can use, so the stock's
// `post` table gains no column. A post's document is its words stemmed in its first language
// where Postgres has a configuration for it ("running" → run, stop words dropped), else as
// written ('simple'). A searched word matches its forms in every configuration (the word as
// written, and its stem in each language), so it finds a post in any language without being
// told which. The index itself is built concurrently by the running dataplane
// (search-index.ts): on a large database that takes long, and must not hold a migration, nor
// lock the table against writes.
import { sql, type Kysely } from 'kysely'

/** ISO 639-1 codes → the Postgres text search configuration for them. */
const CONFIGS: Record<string, string> = {
  ar: 'arabic',
  hy: 'armenian',
  eu: 'basque',
  ca: 'catalan',
  da: 'danish',
  nl: 'dutch',
  en: 'english',
  fi: 'finnish',
  fr: 'french',
  de: 'german',
  el: 'greek',
  hi: 'hindi',
  hu: 'hungarian',
  id: 'indonesian',
  ga: 'irish',
  it: 'italian',
  lt: 'lithuanian',
  ne: 'nepali',
  no: 'norwegian',
  nb: 'norwegian',
  nn: 'norwegian',
  pt: 'portuguese',
  ro: 'romanian',
  ru: 'russian',
  sr: 'serbian',
  es: 'spanish',
  sv: 'swedish',
  ta: 'tamil',
  tr: 'turkish',
  yi: 'yiddish',
}

export async function up(db: Kysely<unknown>): Promise<void> {
  const { rows } = await sql<{ schema: string }>`SELECT current_schema() AS schema`.execute(db)
  const schema = rows[0]!.schema
  // Only the configurations this server has (an embedded Postgres may have fewer).
  const { rows: present } = await sql<{
    name: string
  }>`SELECT cfgname AS name FROM pg_catalog.pg_ts_config`.execute(db)
  const have = new Set(present.map((r) => r.name))
  const mapped = Object.entries(CONFIGS).filter(([, config]) => have.has(config))
  const cases = mapped.map(([code, config]) => `WHEN '${code}' THEN '${config}'`).join(' ')
  const all = ['simple', ...new Set(mapped.map(([, config]) => config))]
  const fn = (name: string) => `"${schema}".${name}`
  // Each body is one expression, so Postgres inlines it where a query calls it (a call of a SQL
  // function it cannot inline costs about ten times the work, per row). Qualified by schema: an
  // expression index is also evaluated by autovacuum, whose search_path lacks this schema.
  for (const statement of [
    `CREATE OR REPLACE FUNCTION ${fn('openplane_search_config')}(langs jsonb)
    RETURNS regconfig LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
      SELECT (CASE lower(split_part(
        CASE WHEN jsonb_typeof(langs) = 'array' THEN coalesce(langs->>0, '') ELSE '' END,
        '-', 1)) ${cases} ELSE 'simple' END)::regconfig
    $$`,
    `CREATE OR REPLACE FUNCTION ${fn('openplane_post_document')}(body text, langs jsonb)
    RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
      SELECT to_tsvector(${fn('openplane_search_config')}(langs), coalesce(body, ''))
    $$`,
    inEveryConfig(fn('openplane_word_query'), 'word', 'plainto_tsquery', all),
    inEveryConfig(fn('openplane_phrase_query'), 'phrase', 'phraseto_tsquery', all),
  ]) {
    await sql.raw(statement).execute(db)
  }
}

/**
 * A function giving a word's (or a phrase's) query in every configuration, each distinct form
 * once: repeated alternatives would make Postgres think the word that much more common, and
 * choose a plan for a common word.
 */
function inEveryConfig(name: string, param: string, parse: string, configs: string[]): string {
  return `CREATE OR REPLACE FUNCTION ${name}(${param} text)
    RETURNS tsquery LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
      SELECT coalesce(string_agg(DISTINCT '(' || q || ')', ' | '), '')::tsquery
      FROM unnest(ARRAY[${configs.map((c) => `'${c}'`).join(', ')}]::regconfig[]) AS c,
        LATERAL (SELECT ${parse}(c, ${param})::text AS q) f
      WHERE q <> ''
    $$`
}

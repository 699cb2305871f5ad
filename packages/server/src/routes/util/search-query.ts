// A post search as people type it in the app: words, "quoted phrases", -excluded words and OR
// (Postgres' websearch syntax), with the operators lifted out. `from:`/`author:` (or a bare
// `did:` token) names the author, `to:` an account replied to or mentioned, `mentions:` an
// account mentioned, `lang:` a language, `since:`/`until:` a date or datetime (inclusive,
// exclusive, on sortAt), `domain:` a linked host, `#tag` a hashtag. An operator whose value is
// not valid (a date that does not parse, a blank name) is dropped, never searched for as text.

export interface PostQuery {
  /** What is left for the full-text match: words, phrases, `-word`, `or`. */
  text: string
  author?: string
  to?: string
  mentions?: string
  /** Lower-cased primary language subtag, `en` for `en-US`. */
  lang?: string
  /** ISO datetimes. */
  since?: string
  until?: string
  /** Lower-cased host, without a leading `www.`. */
  domain?: string
  /** Lower-cased, without `#`. */
  tags: string[]
}

const LANG = /^[a-z]{2,3}(-[a-z0-9]{1,8})*$/i
const DOMAIN = /^([a-z0-9-]+\.)+[a-z0-9-]+$/i

export function parsePostQuery(query: string): PostQuery {
  const out: PostQuery = { text: '', tags: [] }
  const rest: string[] = []
  for (const token of splitUnquoted(query)) {
    if (token.startsWith('"')) {
      rest.push(token)
      continue
    }
    if (token.startsWith('#') && token.length > 1) {
      const tag = token.slice(1).toLowerCase()
      if (!out.tags.includes(tag)) out.tags.push(tag)
      continue
    }
    const colon = token.indexOf(':')
    const head = colon > 0 ? token.slice(0, colon).toLowerCase() : ''
    const value = colon > 0 ? token.slice(colon + 1) : ''
    switch (head) {
      case 'did':
        out.author = token
        continue
      case 'from':
      case 'author':
        if (account(value)) out.author = account(value)
        continue
      case 'to':
        if (account(value)) out.to = account(value)
        continue
      case 'mentions':
        if (account(value)) out.mentions = account(value)
        continue
      case 'lang':
        if (LANG.test(value)) out.lang = value.toLowerCase().split('-')[0]
        continue
      case 'since':
      case 'until': {
        const at = datetime(value)
        if (at) out[head] = at
        continue
      }
      case 'domain': {
        const host = value.toLowerCase().replace(/^www\./, '')
        if (DOMAIN.test(host)) out.domain = host
        continue
      }
    }
    rest.push(token)
  }
  out.text = rest.join(' ')
  return out
}

/** A handle (its `@` dropped, lower-cased) or a DID, or undefined for a blank one. */
function account(value: string): string | undefined {
  const v = value.replace(/^@/, '')
  if (!v) return undefined
  return v.startsWith('did:') ? v : v.toLowerCase()
}

/** `YYYY-MM-DD` (midnight UTC) or a full datetime, as an ISO string; undefined if neither. */
function datetime(value: string): string | undefined {
  if (!/^\d{4}-\d{2}-\d{2}([tT ].*)?$/.test(value)) return undefined
  const ms = Date.parse(value.length === 10 ? `${value}T00:00:00Z` : value)
  return Number.isNaN(ms) ? undefined : new Date(ms).toISOString()
}

/**
 * Tokens between unquoted spaces, quotes kept; blank tokens dropped. Spaces only, as the stock's
 * substring search splits (search-sql.ts shares this); other whitespace stays inside a token,
 * where the full-text parser treats it as a word break anyway.
 */
export function splitUnquoted(query: string): string[] {
  const tokens: string[] = []
  let current = ''
  let quoted = false
  for (const c of query) {
    if (c === ' ' && !quoted) {
      if (current.trim()) tokens.push(current)
      current = ''
      continue
    }
    if (c === '"') quoted = !quoted
    current += c
  }
  if (current.trim()) tokens.push(current)
  return tokens
}

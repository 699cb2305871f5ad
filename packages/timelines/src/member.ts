// A timeline entry as one string, the member of a Redis sorted set (and of the in-process list).
//
//   <sortAt> \x01 <cid> \x01 <post> [ \x02 <repost> ]
//
// Order. The stock orders feed items by the *string* feed_item.sortAt, then the string cid, both
// descending, and resumes a page with `(sortAt, cid) < (<cursor ms as ISO>, <cid>)`. Every member
// has score 0, so Redis orders them by their bytes; \x01 sorts below every character a sortAt or
// cid holds, so member order is exactly the (sortAt, cid) tuple order, and a cursor becomes one
// exclusive lex bound, `(<iso>\x01<cid>` (ZRANGE … BYLEX REV). The stock's indexer only writes
// toISOString() values (24 characters, millisecond precision, `Z`), for which string order and
// epoch-ms order agree and equal milliseconds tie-break on cid. A score of epoch-ms would order
// those the same, but not sortAt strings with sub-millisecond digits or offsets (an adopted
// database, a hand-made row): string order differs from time order there, and the cursor's ISO
// bound cuts them by string comparison. Comparing strings keeps us equal to the stock for those
// too. (Postgres compares under the database collation; for same-shaped ASCII values every
// collation agrees with byte order.) Items with equal sortAt and cid, which the stock leaves in
// index order, are told apart by the rest of the member.
//
// Compactness. Post and repost uris drop `at://`, the known collection and `did:plc:`.
//
// Sentinel and ghost. A list's highest member (\x7f sorts above every printable character) says
// its state: READY or TRUNCATED (materialised; TRUNCATED once it has a ghost), WARMING or
// WARMING_T (collecting writes during a rebuild); no sentinel means not materialised. When a list
// is trimmed, the highest trimmed member plus \x00 (the "ghost") stays in as its lowest member:
// everything above it is exact, nothing below it is known. Members never contain control
// characters, so a ghost sorts just above the member it stands for and below every newer one.
import type { TimeKey, TimelineItem } from './types.ts'

export const SEP = '\x01'
export const REPOST_SEP = '\x02'
export const READY = '\x7fr'
export const TRUNCATED = '\x7ft'
export const WARMING = '\x7fw'
export const WARMING_T = '\x7fx'
export const GHOST_MARK = '\x00'

const POST = 'app.bsky.feed.post'
const REPOST = 'app.bsky.feed.repost'
const PRINTABLE = /^[\x20-\x7e]+$/
const AT_URI = /^at:\/\/(did:[a-z]+:[^/]+)\/([^/]+)\/([^/]+)$/
const PLC_ID = /^[a-z2-7]+$/

function printable(field: string, value: string): string {
  if (!PRINTABLE.test(value)) throw new TypeError(`timeline ${field} must be printable ASCII`)
  return value
}

/** `at://did:plc:X/<collection>/R` → `X/R`; other DIDs → `did:…/R`; other uris unchanged. */
export function compactUri(uri: string, collection: string): string {
  const m = AT_URI.exec(uri)
  if (!m || m[2] !== collection) return uri
  const did = m[1]!
  const plc = did.startsWith('did:plc:') ? did.slice(8) : ''
  return `${PLC_ID.test(plc) ? plc : did}/${m[3]}`
}

export function expandUri(s: string, collection: string): string {
  if (s.startsWith('at://')) return s
  const slash = s.lastIndexOf('/')
  const id = s.slice(0, slash)
  return `at://${id.startsWith('did:') ? id : `did:plc:${id}`}/${collection}/${s.slice(slash + 1)}`
}

export function encodeMember(item: TimelineItem): string {
  const head = `${printable('sortAt', item.sortAt)}${SEP}${printable('cid', item.cid)}`
  const post = compactUri(printable('uri', item.uri), POST)
  if (item.repost === undefined) return `${head}${SEP}${post}`
  return `${head}${SEP}${post}${REPOST_SEP}${compactUri(printable('repost', item.repost), REPOST)}`
}

export function decodeMember(member: string): TimelineItem {
  const a = member.indexOf(SEP)
  const b = member.indexOf(SEP, a + 1)
  const r = member.indexOf(REPOST_SEP, b + 1)
  const sortAt = member.slice(0, a)
  const cid = member.slice(a + 1, b)
  if (r < 0) return { uri: expandUri(member.slice(b + 1), POST), sortAt, cid }
  return {
    uri: expandUri(member.slice(b + 1, r), POST),
    repost: expandUri(member.slice(r + 1), REPOST),
    sortAt,
    cid,
  }
}

/**
 * The feed item's uris as GetTimeline answers them: the post, and the repost ('' for a post).
 * Only what an answer needs is expanded; sortAt and cid stay in the member.
 */
export function memberUris(member: string): { uri: string; repost: string } {
  const b = member.indexOf(SEP, member.indexOf(SEP) + 1)
  const r = member.indexOf(REPOST_SEP, b + 1)
  if (r < 0) return { uri: expandUri(member.slice(b + 1), POST), repost: '' }
  return {
    uri: expandUri(member.slice(b + 1, r), POST),
    repost: expandUri(member.slice(r + 1), REPOST),
  }
}

/** The stock's cursor for the member's item, `<epoch-ms of sortAt>__<cid>` (as cursorOf). */
export function memberCursor(member: string): string {
  const a = member.indexOf(SEP)
  const b = member.indexOf(SEP, a + 1)
  return `${Date.parse(member.slice(0, a))}__${member.slice(a + 1, b)}`
}

export const isGhost = (member: string): boolean => member.endsWith(GHOST_MARK)
export const ghostOf = (member: string): string => member + GHOST_MARK

/** The exclusive upper bound of a page: the member prefix of the cursor position. */
export function cursorBound(before: TimeKey): string {
  return `${before.time}${SEP}${before.key}`
}

/** Redis ZRANGE BYLEX REV upper bound for a page: below the cursor, or below the sentinel. */
export const lexMax = (before: TimeKey | undefined): string =>
  before ? `(${cursorBound(before)}` : '(\x7f'

/**
 * What remove-by-uri matches: a post item's post field, or a repost item's repost field (the feed
 * item uri is the repost's for a repost, as in feed_item).
 */
export function feedUriFields(uri: string): { post: string; repost: string } {
  return { post: compactUri(uri, POST), repost: compactUri(uri, REPOST) }
}

/** Prefixes of the originator's feed field: the compact form, and the full uri form. */
export function originatorPrefixes(did: string): [string, string] {
  const plc = did.startsWith('did:plc:') ? did.slice(8) : ''
  return [`${PLC_ID.test(plc) ? plc : did}/`, `at://${did}/`]
}

/** The feed field: the repost for a repost item, else the post. Mirrors the Lua `feed_field`. */
export function feedField(member: string): { field: string; repost: boolean } {
  const r = member.indexOf(REPOST_SEP)
  if (r >= 0) return { field: member.slice(r + 1), repost: true }
  const a = member.indexOf(SEP)
  return { field: member.slice(member.indexOf(SEP, a + 1) + 1), repost: false }
}

/** Keys are hash-tagged by DID; a brace would break the tag and Cluster slotting. */
export function checkDid(did: string): string {
  if (!did || /[{}\s]/.test(did)) throw new TypeError(`not a usable DID: ${JSON.stringify(did)}`)
  return did
}

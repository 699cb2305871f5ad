// Reply validation and the gates, as the stock decides them once, when a post is indexed: a
// reply's root must match its parent's (invalidReplyRoot), a threadgate on the root may forbid
// the reply (violatesThreadGate), a postgate on a quoted post may forbid the quote
// (violatesEmbeddingRules). Later gate changes never revisit indexed posts.
import type { AppBskyFeedPost } from '@atproto/api'
import { lexParse } from '@atproto/lex-json'
import type { Reader } from '../types.ts'
import { isObj, isTypeOf, gateUriOf, uriToDid } from './common.ts'

type ReplyRef = NonNullable<AppBskyFeedPost.Record['reply']>
type Obj = Record<string, unknown>

const THREADGATE = 'app.bsky.feed.threadgate'
const MENTION = 'app.bsky.richtext.facet#mention'

const parseJson = (json: string): Obj => {
  const value: unknown = lexParse(json)
  return isObj(value) ? value : {}
}
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : [])

/** A stored record (any collection: the stock does not check what a reply points at). */
export function storedRecord(db: Reader, uri: string): Obj | undefined {
  const found = db.first('record', { uri })
  return found && parseJson(found.json)
}

export function validateReply(
  db: Reader,
  creator: string,
  reply: ReplyRef,
): { invalidReplyRoot: boolean; violatesThreadGate: boolean } {
  const rootUri = reply.root.uri
  const parentUri = reply.parent.uri
  const parent = db.first('record', { uri: parentUri })
  const root = db.first('record', { uri: rootUri })
  const gate = db.first('record', { uri: gateUriOf(rootUri, 'threadgate') })
  // Read whether or not the parent's record exists: a batch then loads the parent's post (and
  // the thread above it) with its first reads, not in a pass of its own.
  const parentPost = db.first('post', { uri: parentUri })
  const parentInvalid = parent ? (parentPost?.invalidReplyRoot ?? null) : null
  const invalidReplyRoot = !parent || badRoot(reply, parseJson(parent.json), parentInvalid)
  const violatesThreadGate = violatesGate(
    db,
    creator,
    uriToDid(rootUri),
    root ? parseJson(root.json) : null,
    gate ? parseJson(gate.json) : null,
  )
  return { invalidReplyRoot, violatesThreadGate }
}

function badRoot(reply: ReplyRef, parent: Obj, parentInvalid: boolean | null): boolean {
  // A reply under an invalid reply is invalid too.
  if (parentInvalid) return true
  const parentReply = isObj(parent.reply) ? parent.reply : undefined
  // Replying to the root: the root must not itself be a reply.
  if (reply.parent.uri === reply.root.uri) return !!parentReply
  // Replying to a reply: it must belong to the same thread.
  const parentRoot = isObj(parentReply?.root) ? parentReply.root.uri : undefined
  return parentRoot !== reply.root.uri
}

function violatesGate(
  db: Reader,
  replier: string,
  owner: string,
  rootPost: Obj | null,
  gate: Obj | null,
): boolean {
  // No gate, or a gate without `allow`, lets anyone reply; an empty `allow` lets nobody.
  if (replier === owner || !gate || !gate.allow) return false
  const allow = list(gate.allow)
  const has = (rule: string) => allow.some((r) => isTypeOf(r, `${THREADGATE}#${rule}`))
  const lists = allow
    .filter((r) => isTypeOf(r, `${THREADGATE}#listRule`))
    .map((r) => String((r as Obj).list))
  if (has('mentionRule') && mentions(rootPost, replier)) return false
  const follower = has('followerRule')
  const following = has('followingRule')
  if (!follower && !following && !lists.length) return true
  if (following && follows(db, owner, replier)) return false
  if (follower && follows(db, replier, owner)) return false
  if (lists.length && inLists(db, lists, replier)) return false
  return true
}

function mentions(post: Obj | null, did: string): boolean {
  return list(post?.facets).some((facet) =>
    list(isObj(facet) ? facet.features : undefined).some(
      (f) => isTypeOf(f, MENTION) && (f as Obj).did === did,
    ),
  )
}

function follows(db: Reader, creator: string, subject: string): boolean {
  return !!db.first('follow', { creator, subjectDid: subject })
}

function inLists(db: Reader, lists: string[], did: string): boolean {
  return lists.some((listUri) => !!db.first('list_item', { listUri, subjectDid: did }))
}

/** Whether the quoted post's postgate disables embedding for the quoting author. */
export function violatesEmbeddingRules(db: Reader, quotedUri: string, postUri: string): boolean {
  const gate = storedRecord(db, gateUriOf(quotedUri, 'postgate'))
  if (!gate) return false
  if (uriToDid(postUri) === uriToDid(quotedUri)) return false
  return list(gate.embeddingRules).some((r) => isTypeOf(r, 'app.bsky.feed.postgate#disableRule'))
}

// Posts: the post row (with the reply and gate verdicts the stock settles once, at indexing),
// its feed item, embeds, quote and OP-reply rows; postsCount, the parent's replyCount and the
// quoted post's quoteCount; mention, quote and reply notifications (replies up the thread).
import type { AppBskyFeedPost } from '@atproto/api'
import type { Selectable } from 'kysely'
import { assertRecord } from '../lexicon.ts'
import type {
  Counter,
  NotificationRow,
  Reader,
  RecordPlugin,
  RowInsert,
  RowWrite,
  Tables,
} from '../types.ts'
import { AtUri, normalizeDate, sortAt } from '../util.ts'
import { isTypeOf, jsonList, uriToDid, gateUriOf } from './common.ts'
import { embedDeletes, embedRows, embeddedRecord, quotedPost } from './post-embeds.ts'
import { storedRecord, validateReply, violatesEmbeddingRules } from './post-rules.ts'

type Post = AppBskyFeedPost.Record
type PostRow = Selectable<Tables['post']>

/** Reply notifications reach this many levels up the thread (the post itself is level 0). */
const REPLY_NOTIF_DEPTH = 5

export const post: RecordPlugin<Post, 'post'> = {
  collection: 'app.bsky.feed.post',
  table: 'post',
  parse: (record) => assertRecord<Post>('app.bsky.feed.post', record),
  // Replies and quotes read the thread and the quoted post; a plain post reads nothing.
  readsOnCreate(ref, rec) {
    const reads: { table: 'record' | 'post' | 'quote'; where: Record<string, string> }[] = []
    if (rec.reply) {
      const { root, parent } = rec.reply
      // validateReply's records, the parent's post (its thread above, in the same load),
      // hiddenReplies' gate and descendantsOf's first level.
      reads.push(
        { table: 'record', where: { uri: parent.uri } },
        { table: 'record', where: { uri: root.uri } },
        { table: 'record', where: { uri: gateUriOf(root.uri, 'threadgate') } },
        { table: 'post', where: { uri: parent.uri } },
        { table: 'post', where: { replyParent: ref.uri } },
      )
    }
    const quoted = quotedPost(rec)
    if (quoted) {
      // violatesEmbeddingRules' gate, and ownQuoteSubject.
      reads.push(
        { table: 'record', where: { uri: gateUriOf(quoted.uri, 'postgate') } },
        { table: 'quote', where: { uri: ref.uri } },
      )
    }
    return reads
  },

  toRow(db, ref, rec) {
    const row = {
      uri: ref.uri,
      cid: ref.cid,
      creator: ref.did,
      text: rec.text,
      createdAt: normalizeDate(rec.createdAt),
      replyRoot: rec.reply?.root?.uri || null,
      replyRootCid: rec.reply?.root?.cid || null,
      replyParent: rec.reply?.parent?.uri || null,
      replyParentCid: rec.reply?.parent?.cid || null,
      langs: jsonList(rec.langs),
      tags: jsonList(rec.tags),
      indexedAt: ref.indexedAt,
    }
    const flags: { invalidReplyRoot?: boolean; violatesThreadGate?: boolean } = {}
    if (rec.reply) {
      const checked = validateReply(db, ref.did, rec.reply)
      // The stock writes both flags only when one of them is set (null otherwise).
      if (checked.invalidReplyRoot || checked.violatesThreadGate) Object.assign(flags, checked)
    }
    const quoted = quotedPost(rec)
    const violatesEmbed = !!quoted && violatesEmbeddingRules(db, quoted.uri, ref.uri)
    return { ...row, ...flags, ...(violatesEmbed ? { violatesEmbeddingRules: true } : {}) }
  },

  // Its feed item, OP-reply row and embeds: only the keys count here.
  insertsOnCreate: (ref, rec) =>
    ownRows(
      { uri: ref.uri, cid: ref.cid, creator: ref.did, createdAt: '', indexedAt: ref.indexedAt },
      rec,
    ),

  onInsert(db, row, _ref, rec) {
    const rows: RowWrite[] = ownRows(row, rec)
    const quoted = quotedPost(rec)
    const counters = postCounters(row, 1)
    if (quoted) {
      // The quote row is inserted unless one with this uri outlived its post (an account
      // deletion leaves quote rows, as the stock does): then the old row stays and counts.
      const kept = ownQuoteSubject(db, row.uri)
      counters.push(quoteDelta(quoted.uri, kept === undefined ? 1 : 0))
    }
    return { rows, counters, notifications: notificationsFor(db, row, rec) }
  },

  // Every delete of a post uri, indexed or not, takes the feed items of it (its reposts' too),
  // marks it deleted as an OP reply, and removes the quotes of it with their count.
  unconditional: {
    create: () => [],
    delete(db, uri) {
      const n = db.rows('quote', { subject: uri }).length
      return {
        rows: [
          { kind: 'delete', table: 'feed_item', where: { postUri: uri } },
          // Soft delete: the OP thread walk may still route through it to replies that outlive it.
          {
            kind: 'update',
            table: 'op_thread_reply',
            where: { uri },
            set: { deletedAt: new Date().toISOString() },
          },
          { kind: 'delete', table: 'quote', where: { subject: uri } },
        ],
        counters: n ? [quoteDelta(uri, -n)] : [],
      }
    },
  },

  // onDelete reads the embeds and the quote row it deletes.
  readsOnDelete: (uri) => embedDeletes(uri, true),

  onDelete(db, row, replacedBy, replacedByRecord) {
    const embedded = db.first('post_embed_record', { postUri: row.uri })
    const quoted = !!embedded && new AtUri(embedded.embedUri).collection === post.collection
    const rows: RowWrite[] = embedDeletes(row.uri, quoted)
    const counters = postCounters(row, -1)
    if (embedded && quoted) {
      // Its own quote row, unless it went already (with the quotes of this post, for a post
      // quoting itself).
      const own = ownQuoteSubject(db, row.uri)
      if (own !== undefined) counters.push(quoteDelta(own, -1))
      // The stock recounts the quoted post's row even when nothing changed: it exists after.
      counters.push(quoteDelta(embedded.embedUri, 0))
    }
    const notifications =
      replacedBy && replacedByRecord ? notificationsFor(db, replacedBy, replacedByRecord) : []
    return { rows, counters, notifications, deleteNotificationsFor: [row.uri] }
  },
}

/** postsCount of the author and replyCount of the parent, which leaves out gate violators. */
function postCounters(row: PostRow, sign: 1 | -1): Counter[] {
  const counters: Counter[] = [
    { table: 'profile_agg', key: row.creator, column: 'postsCount', delta: sign },
  ]
  if (row.replyParent) {
    // A zero delta still creates the parent's row, as the stock's recount does.
    const delta = row.violatesThreadGate ? 0 : sign
    counters.push({ table: 'post_agg', key: row.replyParent, column: 'replyCount', delta })
  }
  return counters
}

/**
 * Quote counts follow the quote rows, by subject uri. (The stock recounts by the quoted *cid*,
 * which mixes quotes of posts with identical content and splits quotes across edits of one
 * post, and leaves the count of a deleted post's quotes as it was.)
 */
/** The subject of the quote row a post at this uri holds, if one exists. */
function ownQuoteSubject(db: Reader, uri: string): string | undefined {
  return db.first('quote', { uri })?.subject
}

const quoteDelta = (subject: string, delta: number): Counter => ({
  table: 'post_agg',
  key: subject,
  column: 'quoteCount',
  delta,
})

/** Mention, quote and reply notifications of a post, deduplicated by recipient (never its author). */
function notificationsFor(db: Reader, row: PostRow, rec: Post): NotificationRow[] {
  const notifs: NotificationRow[] = []
  const notified = new Set([row.creator])
  const notify = (n: NotificationRow) => {
    if (notified.has(n.did)) return
    notified.add(n.did)
    notifs.push(n)
  }
  const own = { author: row.creator, recordUri: row.uri, recordCid: row.cid, sortAt: row.sortAt }
  for (const did of mentionedDids(rec)) notify({ ...own, did, reason: 'mention' })
  const embedded = embeddedRecord(rec)
  if (!row.violatesEmbeddingRules && embedded) {
    const uri = new AtUri(embedded.uri)
    if (uri.collection === post.collection) {
      notify({ ...own, did: uri.host, reason: 'quote', reasonSubject: uri.toString() })
    }
  }
  // No reply notifications for a gate violator; a root post has nobody above it to notify.
  if (row.violatesThreadGate || !row.replyParent) return notifs
  const ancestors = ancestorsOf(db, row.uri)
  const descendants = descendantsOf(db, row.uri)
  const hidden = hiddenReplies(db, row.replyRoot || row.uri)
  for (const a of ancestors) {
    if (a.uri === row.uri || a.height >= REPLY_NOTIF_DEPTH) continue
    const uri = new AtUri(a.uri)
    notify({ ...own, did: uri.host, reason: 'reply', reasonSubject: uri.toString() })
    // A hidden reply's authors above it hear nothing.
    if (hidden.includes(uri.toString())) break
  }
  // Replies indexed before this post (out of order) notify this post's thread upwards.
  for (const d of descendants) {
    for (const a of ancestors) {
      if (d.depth + a.height >= REPLY_NOTIF_DEPTH) continue
      const uri = new AtUri(a.uri)
      notify({
        did: uri.host,
        reason: 'reply',
        reasonSubject: uri.toString(),
        author: d.creator,
        recordUri: d.uri,
        recordCid: d.cid,
        sortAt: d.sortAt,
      })
    }
  }
  return notifs
}

function mentionedDids(rec: Post): string[] {
  return (rec.facets ?? [])
    .flatMap((facet): unknown[] => facet.features)
    .filter((f) => isTypeOf(f, 'app.bsky.richtext.facet#mention'))
    .map((f) => String((f as { did?: unknown }).did))
}

function hiddenReplies(db: Reader, rootUri: string): string[] {
  const gate = storedRecord(db, gateUriOf(rootUri, 'threadgate'))
  return Array.isArray(gate?.hiddenReplies) ? gate.hiddenReplies.map(String) : []
}

/** The post and its ancestors up to REPLY_NOTIF_DEPTH levels, nearest first. */
function ancestorsOf(db: Reader, uri: string): { uri: string; height: number }[] {
  const out: { uri: string; height: number }[] = []
  let current = db.first('post', { uri })
  for (let height = 0; current; height++) {
    out.push({ uri: current.uri, height })
    if (height >= REPLY_NOTIF_DEPTH || !current.replyParent) break
    current = db.first('post', { uri: current.replyParent })
  }
  return out
}

/**
 * Replies below the post up to REPLY_NOTIF_DEPTH levels, level by level as the stock's recursive
 * query finds them (a loop in the reply chain is walked again, as there).
 */
function descendantsOf(db: Reader, uri: string): (PostRow & { depth: number })[] {
  const out: (PostRow & { depth: number })[] = []
  let level = [uri]
  for (let depth = 1; depth <= REPLY_NOTIF_DEPTH && level.length; depth++) {
    const next: string[] = []
    for (const parent of level) {
      for (const reply of db.rows('post', { replyParent: parent })) {
        out.push({ ...reply, depth })
        next.push(reply.uri)
      }
    }
    level = next
  }
  return out
}

/** The rows a post inserts beside its own: its feed item, its OP-reply row, its embeds. */
function ownRows(
  row: { uri: string; cid: string; creator: string; createdAt: string; indexedAt: string },
  rec: Post,
): RowInsert[] {
  const rows: RowInsert[] = [
    {
      kind: 'insert',
      table: 'feed_item',
      values: {
        type: 'post',
        uri: row.uri,
        cid: row.cid,
        postUri: row.uri,
        originatorDid: row.creator,
        sortAt: sortAt(row.createdAt, row.indexedAt),
      },
    },
  ]
  // OP replies per thread, wherever they sit in the tree.
  if (rec.reply?.parent.uri && row.creator === uriToDid(rec.reply.root.uri)) {
    rows.push({
      kind: 'insert',
      table: 'op_thread_reply',
      values: {
        rootUri: rec.reply.root.uri,
        parentUri: rec.reply.parent.uri,
        uri: row.uri,
        deletedAt: null,
      },
    })
  }
  rows.push(...embedRows(row, rec))
  return rows
}

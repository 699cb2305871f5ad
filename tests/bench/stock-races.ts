// The stock indexer runs repos in parallel, so an event can be indexed before an event of another
// repo that the firehose sent earlier. Ours applies events in firehose order (and equals the stock
// fed one event at a time: tests/indexer/corpus.test.ts, on the same generator). Two kinds of
// difference follow from that race alone, and are counted apart from real differences:
//   A. A reply indexed before its parent is judged invalid for good (invalidReplyRoot on the
//      stock side only); one indexed before its parent's or root's deletion is judged valid (on
//      the stock side only), and the verdict carries down the thread. Reply notifications in
//      those threads then differ (an invalid reply sends none, and posts indexed after their
//      replies send the replies' notifications late); so do the notifications of any reply made
//      within the stock's reordering window (its events in flight, in stream time) of its parent
//      or of the post it notifies about.
//      The window is per repo, not global: the stock runs each repo's events in turn, so a busy
//      repo's posts can trail the rest of the stream by far more than the events in flight. A
//      reply notification only ours has is explained when the stock committed a post between
//      the reply and the notified post after the reply itself (Postgres' `xmin` gives the order):
//      that post's own insert then walked down to the reply, and the stock's insert notifies
//      each account once, so the reply's notifications to the accounts it had notified already
//      (its own author's, its ancestors') were dropped.
//   B. A record and the deletion of the post it refers to, in another repo, indexed in the other
//      order: a repost's feed item or a quote of a post deleted before it came survives on one
//      side only, and so does the quote count kept for the deleted post. Likewise a reply and
//      the deletion of a post above it: the stock, having run that post's repo ahead, deleted it
//      before indexing the reply, so its walk up the thread stopped there, and the reply's
//      notifications to that post and to the posts above it (present in firehose order, as ours
//      met them) are only ours. Seen as a walk up from the reply, in ours' final tables, that
//      stops at a parent gone from both schemas before reaching the notified post.
// Everything else is a table difference.
import pg from 'pg'
import { PG_URL } from '../harness/env.ts'
import type { TableDiff } from '../harness/indexer.ts'

type Row = Record<string, unknown>

export interface RaceReport {
  rows: number
  describe(): string
}

const TID_CHARS = '234567abcdefghijklmnopqrstuvwxyz'

/** Milliseconds of the TID record key of an at-uri (the time its record was made), if it has one. */
function tidMs(uri: string): number | undefined {
  const rkey = uri.split('/').pop() ?? ''
  if (!/^[2-7a-z]{13}$/.test(rkey)) return undefined
  let us = 0
  for (const c of rkey.slice(0, 11)) us = us * 32 + TID_CHARS.indexOf(c)
  // 13 chars hold 65 bits: the microseconds, then 10 bits of clock id; 11 chars are the former.
  return us / 1000
}

export async function classifyStockRaces(
  stock: string,
  ours: string,
  diffs: TableDiff[],
  /** How far apart (stream seconds) two events can be and still be reordered by the stock. */
  windowSeconds: number,
): Promise<{ races: RaceReport; unexplained: TableDiff[] }> {
  const client = new pg.Client({ connectionString: PG_URL })
  await client.connect()
  const explained = new Map<string, number>()
  const note = (what: string) => explained.set(what, (explained.get(what) ?? 0) + 1)
  try {
    // A: replies the stock judged invalid and ours valid (the stock saw the reply before its
    // parent); and replies ours judged invalid and the stock valid because the stock saw them
    // before their parent or root was deleted (gone from both schemas by the end), or under
    // such a reply (its verdict carries down the thread).
    const verdicts = await client.query<{
      uri: string
      root: string
      parent: string | null
      stockInvalid: boolean
      parentGone: boolean
      rootGone: boolean
    }>(`
      select s.uri, coalesce(s."replyRoot", s.uri) root, s."replyParent" parent,
        coalesce(s."invalidReplyRoot", false) "stockInvalid",
        not exists (select 1 from "${stock}".post p where p.uri = s."replyParent")
          and not exists (select 1 from "${ours}".post p where p.uri = s."replyParent") "parentGone",
        not exists (select 1 from "${stock}".post p where p.uri = s."replyRoot")
          and not exists (select 1 from "${ours}".post p where p.uri = s."replyRoot") "rootGone"
      from "${stock}".post s join "${ours}".post o on o.uri = s.uri
      where coalesce(s."invalidReplyRoot", false) <> coalesce(o."invalidReplyRoot", false)`)
    const raced = new Set<string>()
    for (const v of verdicts.rows)
      if (v.stockInvalid || v.parentGone || v.rootGone) raced.add(v.uri)
    for (let grew = true; grew;) {
      grew = false
      for (const v of verdicts.rows) {
        if (!raced.has(v.uri) && v.parent && raced.has(v.parent)) {
          raced.add(v.uri)
          grew = true
        }
      }
    }
    const rows = verdicts.rows.filter((v) => raced.has(v.uri))
    const racedThreads = new Set(rows.map((r) => r.root))
    const rootOf = new Map<string, string>()
    const threadRows = await client.query<{ uri: string; root: string }>(
      `select uri, coalesce("replyRoot", uri) root from "${ours}".post where "replyRoot" = any($1)`,
      [[...racedThreads]],
    )
    for (const r of threadRows.rows) rootOf.set(r.uri, r.root)
    // B: posts deleted by the end (referenced, but in neither schema's post table).
    const referenced = new Set<string>()
    for (const d of diffs) {
      for (const line of [...d.onlyStock, ...d.onlyOurs]) {
        const r = JSON.parse(line) as Row
        if (d.table === 'feed_item') referenced.add(String(r.postUri))
        if (d.table === 'quote') referenced.add(String(r.subject))
        if (d.table === 'post_agg') referenced.add(String(r.uri))
      }
    }
    const present = await client.query<{ uri: string }>(
      `select uri from "${stock}".post where uri = any($1)
       union select uri from "${ours}".post where uri = any($1)`,
      [[...referenced]],
    )
    const gone = new Set([...referenced].filter((u) => !present.rows.some((p) => p.uri === u)))
    // Parents of the replies whose notifications differ: the chain up to the notified post.
    const replyUris = new Set<string>()
    for (const d of diffs) {
      if (d.table !== 'notification') continue
      for (const line of [...d.onlyStock, ...d.onlyOurs]) {
        const r = JSON.parse(line) as Row
        if (r.reason === 'reply') replyUris.add(String(r.recordUri))
      }
    }
    const parents = await client.query<{ uri: string; parent: string | null }>(
      `select uri, "replyParent" parent from "${ours}".post where uri = any($1)`,
      [[...replyUris]],
    )
    const parentOf = new Map(parents.rows.map((r) => [r.uri, r.parent]))
    // Reply notifications only ours has whose path up to the notified post holds a post the
    // stock committed after the reply (see A above).
    const pairs = notificationPairs(diffs)
    const late = await client.query<{ reply: string; subject: string }>(
      `with recursive up as (
         select p.uri, p."replyParent" parent, p.xmin::text::bigint x, 0 d,
           c.reply, c.subject, r.xmin::text::bigint rx
         from unnest($1::text[], $2::text[]) c(reply, subject)
         join "${stock}".post r on r.uri = c.reply
         join "${stock}".post p on p.uri = r."replyParent"
         union all
         select p.uri, p."replyParent", p.xmin::text::bigint, up.d + 1, up.reply, up.subject, up.rx
         from up join "${stock}".post p on p.uri = up.parent
         where up.uri <> up.subject and up.d < 8
       )
       select distinct reply, subject from up where x > rx`,
      [pairs.map((p) => p.reply), pairs.map((p) => p.subject)],
    )
    const lateSet = new Set(late.rows.map((r) => `${r.reply} ${r.subject}`))
    // Reply notifications only ours has whose thread, walked up from the reply, breaks at a
    // post deleted by the end before reaching the notified post (see B above).
    const cut = await client.query<{ reply: string; subject: string }>(
      `with recursive up as (
         select c.reply, c.subject, p.uri, p."replyParent" parent, 0 d
         from unnest($1::text[], $2::text[]) c(reply, subject)
         join "${ours}".post p on p.uri = c.reply
         union all
         select up.reply, up.subject, p.uri, p."replyParent", up.d + 1
         from up join "${ours}".post p on p.uri = up.parent
         where up.uri <> up.subject and up.d < 8
       )
       select distinct reply, subject from up
       where uri <> subject and parent is not null
         and not exists (select 1 from "${ours}".post p where p.uri = up.parent)
         and not exists (select 1 from "${stock}".post p where p.uri = up.parent)`,
      [pairs.map((p) => p.reply), pairs.map((p) => p.subject)],
    )
    const cutSet = new Set(cut.rows.map((r) => `${r.reply} ${r.subject}`))
    const close = (a: string | null | undefined, b: string | null | undefined) => {
      const ta = a ? tidMs(a) : undefined
      const tb = b ? tidMs(b) : undefined
      return ta !== undefined && tb !== undefined && Math.abs(ta - tb) <= windowSeconds * 1000
    }
    const unexplained: TableDiff[] = []
    for (const d of diffs) {
      const keep = (ours: boolean) => (line: string) => {
        const r = JSON.parse(line) as Row
        if (d.table === 'post' && raced.has(String(r.uri))) {
          note('A: post rows (reply verdicts)')
          return false
        }
        if (d.table === 'notification' && r.reason === 'reply') {
          const uri = String(r.recordUri)
          if (raced.has(uri) || racedThreads.has(rootOf.get(uri) ?? uri)) {
            note('A: reply notifications in those threads')
            return false
          }
          // A reply made close enough to its parent, or to the post it notifies about, for the
          // stock to have indexed them out of order: the thread it walked up was incomplete.
          if (close(uri, String(r.reasonSubject)) || close(uri, parentOf.get(uri))) {
            note('A: reply notifications of replies close to their parent or the notified post')
            return false
          }
          if (ours && lateSet.has(`${uri} ${String(r.reasonSubject)}`)) {
            note('A: reply notifications dropped when a post above the reply came after it')
            return false
          }
          if (ours && cutSet.has(`${uri} ${String(r.reasonSubject)}`)) {
            note('B: reply notifications past a post above the reply deleted around it')
            return false
          }
        }
        const target =
          d.table === 'feed_item'
            ? r.postUri
            : d.table === 'quote'
              ? r.subject
              : d.table === 'post_agg'
                ? r.uri
                : undefined
        if (target !== undefined && gone.has(String(target))) {
          note(`B: ${d.table} rows of posts deleted around them`)
          return false
        }
        return true
      }
      const left = {
        ...d,
        onlyStock: d.onlyStock.filter(keep(false)),
        onlyOurs: d.onlyOurs.filter(keep(true)),
      }
      if (left.onlyStock.length || left.onlyOurs.length) unexplained.push(left)
    }
    const total = [...explained.values()].reduce((a, b) => a + b, 0)
    return {
      races: {
        rows: total,
        describe: () =>
          `${raced.size} replies judged before their parent arrived or after it went, ${gone.size} deleted posts: ` +
          [...explained].map(([what, n]) => `${n} ${what}`).join(', '),
      },
      unexplained,
    }
  } finally {
    await client.end()
  }
}

/** The (reply, notified post) of every reply notification only ours has. */
function notificationPairs(diffs: TableDiff[]): { reply: string; subject: string }[] {
  const out: { reply: string; subject: string }[] = []
  for (const d of diffs) {
    if (d.table !== 'notification') continue
    for (const line of d.onlyOurs) {
      const r = JSON.parse(line) as Row
      if (r.reason === 'reply')
        out.push({ reply: String(r.recordUri), subject: String(r.reasonSubject) })
    }
  }
  return out
}

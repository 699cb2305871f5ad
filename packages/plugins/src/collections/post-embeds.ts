// A post's embed as the stock indexes it: one row set per embed part (a recordWithMedia is split
// into its record and its media), plus a `quote` row when the embedded record is a post.
import type { AppBskyFeedPost } from '@atproto/api'
import type { RowDelete, RowInsert } from '../types.ts'
import { AtUri } from '../util.ts'
import { blobCid, isObj, isTypeOf } from './common.ts'

type Post = AppBskyFeedPost.Record
type Obj = Record<string, unknown>

const POST = 'app.bsky.feed.post'
const EMBED_TABLES = [
  'post_embed_image',
  'post_embed_external',
  'post_embed_record',
  'post_embed_video',
  'post_embed_gallery_image',
] as const

/** The embed parts, in the order the stock tries them. */
function parts(embed: Post['embed']): unknown[] {
  if (!embed) return []
  if (isTypeOf(embed, 'app.bsky.embed.recordWithMedia')) {
    const { record, media } = embed as Obj
    return [isObj(record) ? { ...record, $type: 'app.bsky.embed.record' } : record, media]
  }
  return [embed]
}

const list = (v: unknown): Obj[] => (Array.isArray(v) ? v.filter(isObj) : [])

const KINDS = ['images', 'external', 'record', 'video', 'gallery'] as const
type Kind = (typeof KINDS)[number]

/** The first embed type a part matches, tried in the stock's order. */
const kindOf = (part: unknown): Kind | undefined =>
  KINDS.find((k) => isTypeOf(part, `app.bsky.embed.${k}`))

/** The strong ref of the post's `app.bsky.embed.record` part, if it has one. */
export function embeddedRecord(rec: Post): { uri: string; cid: string } | null {
  const part = parts(rec.embed).find((p) => kindOf(p) === 'record')
  if (!isObj(part) || !isObj(part.record)) return null
  return { uri: String(part.record.uri), cid: String(part.record.cid) }
}

/** The quoted post (an embedded record in the post collection); parsing throws on a bad uri. */
export function quotedPost(rec: Post): { uri: string; cid: string } | null {
  const ref = embeddedRecord(rec)
  return ref && new AtUri(ref.uri).collection === POST ? ref : null
}

const insert = (table: RowInsert['table'], values: Obj): RowInsert =>
  ({ kind: 'insert', table, values }) as RowInsert

function partRows(postUri: string, part: unknown): RowInsert[] {
  if (!isObj(part)) return []
  switch (kindOf(part)) {
    case 'images':
      return list(part.images).map((img, position) =>
        insert('post_embed_image', {
          postUri,
          position,
          imageCid: blobCid(img.image),
          alt: img.alt,
        }),
      )
    case 'external': {
      const ext = isObj(part.external) ? part.external : {}
      return [
        insert('post_embed_external', {
          postUri,
          uri: ext.uri,
          title: ext.title,
          description: ext.description,
          thumbCid: blobCid(ext.thumb) || null,
        }),
      ]
    }
    case 'record': {
      const ref = isObj(part.record) ? part.record : {}
      return [insert('post_embed_record', { postUri, embedUri: ref.uri, embedCid: ref.cid })]
    }
    case 'video':
      // alt is optional for videos (required for images).
      return [
        insert('post_embed_video', {
          postUri,
          videoCid: blobCid(part.video),
          alt: part.alt ?? null,
        }),
      ]
    case 'gallery':
      // Unknown item kinds are skipped but keep their position, as in the stock.
      return list(part.items).flatMap((item, position) =>
        isTypeOf(item, 'app.bsky.embed.gallery#image')
          ? [
              insert('post_embed_gallery_image', {
                postUri,
                position,
                imageCid: blobCid(item.image),
                alt: item.alt,
              }),
            ]
          : [],
      )
    default:
      return []
  }
}

/** Rows of the embed tables and the quote table for a freshly inserted post. */
export function embedRows(
  post: { uri: string; cid: string; createdAt: string; indexedAt: string },
  rec: Post,
): RowInsert[] {
  const rows = parts(rec.embed).flatMap((part) => partRows(post.uri, part))
  const quoted = quotedPost(rec)
  if (quoted) {
    rows.push({
      kind: 'insert',
      table: 'quote',
      values: {
        uri: post.uri,
        cid: post.cid,
        subject: quoted.uri,
        subjectCid: quoted.cid,
        createdAt: post.createdAt,
        indexedAt: post.indexedAt,
      },
    })
  }
  return rows
}

/** Removal of every embed row of a post (and of its own quote row, when it quoted a post). */
export function embedDeletes(postUri: string, quoted: boolean): RowDelete[] {
  const rows: RowDelete[] = EMBED_TABLES.map((table) => ({
    kind: 'delete',
    table,
    where: { postUri },
  }))
  if (quoted) rows.push({ kind: 'delete', table: 'quote', where: { uri: postUri } })
  return rows
}

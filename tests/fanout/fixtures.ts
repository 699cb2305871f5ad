// Rows the fan-out tests commit: a post's feed_item, stored where rebuilds read it, and the
// change the writer would hand over for it; a follow row.
import type { Db } from '@openplane/db'
import type { Change, FeedItemValues } from '@openplane/ingest'

export const did = (name: string) => `did:plc:${name.padEnd(24, 'x')}`

/** Post number `n` of `author` (its sortAt is `n` seconds into 2025): stored, and its change. */
export async function storedPost(
  db: Db,
  author: string,
  n: number,
): Promise<[Change, FeedItemValues]> {
  const row: FeedItemValues = {
    type: 'post',
    uri: `at://${did(author)}/app.bsky.feed.post/p${n}`,
    cid: `bafypost${String(n).padStart(6, '0')}`,
    postUri: `at://${did(author)}/app.bsky.feed.post/p${n}`,
    originatorDid: did(author),
    sortAt: new Date(Date.UTC(2025, 0, 1, 0, 0, n)).toISOString(),
  }
  await db.db
    .insertInto('feed_item')
    .values({ ...row, type: 'post' })
    .execute()
  return [{ table: 'feed_item', op: 'insert', row }, row]
}

/** `a` follows `b` as a follow row (with the sortAt Postgres generates); `tag` tells rows apart. */
export const followRow = (a: string, b: string, tag = '') => ({
  uri: `at://${did(a)}/app.bsky.graph.follow/${a}-${b}${tag}`,
  cid: 'bafyfollow',
  creator: did(a),
  subjectDid: did(b),
  createdAt: '2025-01-01T00:00:00.000Z',
  indexedAt: '2025-01-01T00:00:00.000Z',
  sortAt: '2025-01-01T00:00:00.000Z',
})

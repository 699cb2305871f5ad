// A timeline page's items as the bytes its answer is written from: the home timeline's store
// hands out its members' bytes without making strings (@openplane/timelines member-items.ts);
// a page answered from Postgres wraps its strings.

/**
 * A page's feed items as their uris' bytes (UTF-8), sized before they are written: the frame's
 * length prefix comes first. A home timeline page writes them from its stored form without
 * making the uri strings.
 */
export interface FeedItemBytes {
  readonly length: number
  /** Bytes of item i's post uri. */
  uriSize(i: number): number
  /** Bytes of item i's repost uri; 0 for a post. */
  repostSize(i: number): number
  /** Writes item i's post uri at `at`; returns where it ends. */
  writeUri(i: number, buf: Buffer, at: number): number
  /** Writes item i's repost uri at `at` (nothing for a post); returns where it ends. */
  writeRepost(i: number, buf: Buffer, at: number): number
}

/** Items given as strings (a page answered from Postgres) as FeedItemBytes. */
export function feedItemBytes(items: readonly { uri: string; repost: string }[]): FeedItemBytes {
  return {
    length: items.length,
    uriSize: (i) => Buffer.byteLength(items[i]!.uri, 'utf8'),
    repostSize: (i) => Buffer.byteLength(items[i]!.repost, 'utf8'),
    writeUri: (i, buf, at) => at + buf.write(items[i]!.uri, at, 'utf8'),
    writeRepost: (i, buf, at) => at + buf.write(items[i]!.repost, at, 'utf8'),
  }
}

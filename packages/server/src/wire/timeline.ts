// A GetTimelineResponse written straight into its gRPC frame: the hottest answer the dataplane
// gives (every home timeline page), encoded without building a message object and walking its
// reflection data, into one buffer that already holds the 5-byte gRPC prefix. The items write
// their own bytes (FeedItemBytes): a page from the store copies them out of its members. Byte
// for byte what protobuf-es writes for the same page (fields in number order, empty strings left
// out); a test holds the two equal.
import type { FeedItemBytes } from './feed-items.ts'

/** TimelineFeedItem.uri, .repost and GetTimelineResponse.items, .cursor: length-delimited tags. */
const ITEM_URI = 0x0a
const ITEM_REPOST = 0x1a
const RESPONSE_ITEMS = 0x0a
const RESPONSE_CURSOR = 0x12

const varintSize = (n: number): number =>
  n < 0x80 ? 1 : n < 0x4000 ? 2 : n < 0x200000 ? 3 : n < 0x10000000 ? 4 : 5

function writeVarint(buf: Buffer, at: number, n: number): number {
  while (n >= 0x80) {
    buf[at++] = (n & 0x7f) | 0x80
    n >>>= 7
  }
  buf[at++] = n
  return at
}

/** A length-delimited field's size: tag, length, bytes (none when empty). */
const fieldSize = (bytes: number): number => (bytes ? 1 + varintSize(bytes) + bytes : 0)

/** A field's tag and length; its bytes are written after it. */
function writeHead(buf: Buffer, at: number, tag: number, bytes: number): number {
  buf[at++] = tag
  return writeVarint(buf, at, bytes)
}

/**
 * Frames are cut from a shared slab, as Node's own pool does for buffers under 4 KB (a page's
 * frame is 4–5 KB): a view on a slab makes no ArrayBuffer of its own, and each young ArrayBuffer
 * costs the next young-generation collection a sweep. No byte of a slab is handed out twice: a
 * full slab is left to its frames, and freed with the last of them.
 */
const SLAB_BYTES = 256 * 1024
let slab = Buffer.allocUnsafeSlow(SLAB_BYTES)
let slabUsed = 0

function frameBuffer(size: number): Buffer {
  if (size > SLAB_BYTES / 8) return Buffer.allocUnsafe(size)
  if (slabUsed + size > SLAB_BYTES) {
    slab = Buffer.allocUnsafeSlow(SLAB_BYTES)
    slabUsed = 0
  }
  const buf = slab.subarray(slabUsed, slabUsed + size)
  // Eight-byte aligned, as Node's pool keeps its slices.
  slabUsed = (slabUsed + size + 7) & ~7
  return buf
}

/** The page as one uncompressed gRPC message frame: flag byte, big-endian length, protobuf. */
export function timelineFrame(page: { items: FeedItemBytes; cursor: string }): Buffer {
  const { items, cursor } = page
  const n = items.length
  const sizes = new Uint32Array(n * 3)
  let total = 0
  for (let i = 0; i < n; i++) {
    const uri = items.uriSize(i)
    const repost = items.repostSize(i)
    const size = fieldSize(uri) + fieldSize(repost)
    sizes[i * 3] = uri
    sizes[i * 3 + 1] = repost
    sizes[i * 3 + 2] = size
    total += 1 + varintSize(size) + size
  }
  const cursorBytes = Buffer.byteLength(cursor, 'utf8')
  total += fieldSize(cursorBytes)
  const buf = frameBuffer(5 + total)
  buf[0] = 0
  buf.writeUInt32BE(total, 1)
  let at = 5
  for (let i = 0; i < n; i++) {
    at = writeHead(buf, at, RESPONSE_ITEMS, sizes[i * 3 + 2]!)
    const uri = sizes[i * 3]!
    if (uri) at = items.writeUri(i, buf, writeHead(buf, at, ITEM_URI, uri))
    const repost = sizes[i * 3 + 1]!
    if (repost) at = items.writeRepost(i, buf, writeHead(buf, at, ITEM_REPOST, repost))
  }
  if (cursorBytes) buf.write(cursor, writeHead(buf, at, RESPONSE_CURSOR, cursorBytes), 'utf8')
  return buf
}

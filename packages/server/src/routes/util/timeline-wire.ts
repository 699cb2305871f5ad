// A GetTimelineResponse written straight into its gRPC frame: the hottest answer the dataplane
// gives (every home timeline page), encoded without building a message object and walking its
// reflection data, into one buffer that already holds the 5-byte gRPC prefix. Byte for byte what
// protobuf-es writes for the same page (fields in number order, empty strings left out); a test
// holds the two equal.
import type { TimelinePage } from './timeline-sql.ts'

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

/** A length-delimited field's size: tag, length, bytes (none when the string is empty). */
const fieldSize = (bytes: number): number => (bytes ? 1 + varintSize(bytes) + bytes : 0)

function writeField(buf: Buffer, at: number, tag: number, s: string, bytes: number): number {
  if (!bytes) return at
  buf[at++] = tag
  at = writeVarint(buf, at, bytes)
  return at + buf.write(s, at, bytes, 'utf8')
}

/** The page as one uncompressed gRPC message frame: flag byte, big-endian length, protobuf. */
export function timelineFrame(page: TimelinePage): Buffer {
  const { items, cursor } = page
  const sizes = new Uint32Array(items.length * 3)
  let total = 0
  for (let i = 0; i < items.length; i++) {
    const item = items[i]!
    const uri = Buffer.byteLength(item.uri, 'utf8')
    const repost = Buffer.byteLength(item.repost, 'utf8')
    const size = fieldSize(uri) + fieldSize(repost)
    sizes[i * 3] = uri
    sizes[i * 3 + 1] = repost
    sizes[i * 3 + 2] = size
    total += 1 + varintSize(size) + size
  }
  const cursorBytes = Buffer.byteLength(cursor, 'utf8')
  total += fieldSize(cursorBytes)
  const buf = Buffer.allocUnsafe(5 + total)
  buf[0] = 0
  buf.writeUInt32BE(total, 1)
  let at = 5
  for (let i = 0; i < items.length; i++) {
    const item = items[i]!
    buf[at++] = RESPONSE_ITEMS
    at = writeVarint(buf, at, sizes[i * 3 + 2]!)
    at = writeField(buf, at, ITEM_URI, item.uri, sizes[i * 3]!)
    at = writeField(buf, at, ITEM_REPOST, item.repost, sizes[i * 3 + 1]!)
  }
  writeField(buf, at, RESPONSE_CURSOR, cursor, cursorBytes)
  return buf
}

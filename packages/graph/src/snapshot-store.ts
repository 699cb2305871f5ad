// Snapshot storage: bitmaps in roaring's portable format, packed into records, records packed into
// chunk rows. A bytea value cannot exceed 1 GB, and one bitmap of ids < 2^31 serializes to at most
// ~256 MB, so a record never spans chunks and each chunk decodes on its own: a restore holds one
// chunk at a time.
import type { Db } from '@openplane/db'
import type { SetRecord } from './set-store.ts'

/** Bumped when the record layout changes; older snapshots are then refused, not misread. */
export const SNAPSHOT_FORMAT = 1
/** Target chunk size; a larger record gets a chunk of its own. */
const CHUNK_BYTES = 1024 * 1024
/** u8 direction, u32 actor id, u32 set size, u32 byte length (little-endian), then the set. */
const RECORD_HEADER = 13

/** 0: the actor's following; 1: the actor's followers. */
export type Direction = 0 | 1

export interface SnapshotRecord extends SetRecord {
  direction: Direction
}

export interface SnapshotMeta {
  id: number
  takenAt: Date
  /** The caller's position (e.g. the firehose seq) the snapshot is consistent with. */
  cursor: number
  /** Every actor id in the snapshot is at most this. */
  actorIdHighWater: number
  edgeCount: number
  chunkCount: number
  bytes: number
}

/**
 * Serializes all records into chunks now, synchronously, so the snapshot is the graph as it was at
 * this call even if it changes while the chunks are written. Costs the serialized size in memory.
 */
export function encodeChunks(
  records: Iterable<SnapshotRecord>,
  chunkBytes = CHUNK_BYTES,
): Buffer[] {
  const chunks: Buffer[] = []
  let buf = Buffer.allocUnsafe(chunkBytes)
  let off = 0
  for (const { direction, id, count, byteLength, write } of records) {
    const need = RECORD_HEADER + byteLength
    if (off + need > buf.length) {
      if (off > 0) chunks.push(buf.subarray(0, off))
      buf = Buffer.allocUnsafe(Math.max(chunkBytes, need))
      off = 0
    }
    buf.writeUInt8(direction, off)
    buf.writeUInt32LE(id, off + 1)
    buf.writeUInt32LE(count, off + 5)
    buf.writeUInt32LE(byteLength, off + 9)
    write(buf.subarray(off + RECORD_HEADER, off + need))
    off += need
  }
  if (off > 0) chunks.push(buf.subarray(0, off))
  return chunks
}

/** Writes a snapshot in one transaction (readers see all of it or none), dropping older ones. */
export async function writeSnapshot(
  db: Db,
  chunks: readonly Buffer[],
  meta: { cursor: number; actorIdHighWater: number; edgeCount: number },
): Promise<SnapshotMeta> {
  const bytes = chunks.reduce((sum, chunk) => sum + chunk.length, 0)
  return db.db.transaction().execute(async (tx) => {
    const head = await tx
      .insertInto('openplane_graph_snapshot')
      .values({ ...meta, chunkCount: chunks.length, bytes, format: SNAPSHOT_FORMAT })
      .returning(['id', 'takenAt'])
      .executeTakeFirstOrThrow()
    for (const [seq, data] of chunks.entries()) {
      await tx
        .insertInto('openplane_graph_snapshot_chunk')
        .values({ snapshot: head.id, seq, data })
        .execute()
    }
    // Only older ones: a concurrent writer's newer snapshot must survive ours.
    await tx.deleteFrom('openplane_graph_snapshot').where('id', '<', head.id).execute()
    return { ...meta, ...head, chunkCount: chunks.length, bytes }
  })
}

/**
 * Reads the latest snapshot, handing each record to `onRecord` chunk by chunk. One repeatable-read
 * transaction, so a newer snapshot replacing this one meanwhile cannot pull chunks away.
 */
export async function readSnapshot(
  db: Db,
  onRecord: (direction: Direction, id: number, count: number, data: Uint8Array) => void,
): Promise<SnapshotMeta | undefined> {
  return db.db
    .transaction()
    .setIsolationLevel('repeatable read')
    .setAccessMode('read only')
    .execute(async (tx) => {
      const head = await tx
        .selectFrom('openplane_graph_snapshot')
        .selectAll()
        .orderBy('id', 'desc')
        .limit(1)
        .executeTakeFirst()
      if (!head) return undefined
      if (head.format !== SNAPSHOT_FORMAT) {
        throw new Error(
          `graph snapshot ${head.id} has format ${head.format}, not ${SNAPSHOT_FORMAT}`,
        )
      }
      let bytes = 0
      for (let seq = 0; seq < head.chunkCount; seq++) {
        const row = await tx
          .selectFrom('openplane_graph_snapshot_chunk')
          .select('data')
          .where('snapshot', '=', head.id)
          .where('seq', '=', seq)
          .executeTakeFirst()
        if (!row) throw new Error(`graph snapshot ${head.id} lacks chunk ${seq}`)
        decodeChunk(row.data, onRecord)
        bytes += row.data.byteLength
      }
      if (bytes !== head.bytes) {
        throw new Error(`graph snapshot ${head.id} has ${bytes} bytes, expected ${head.bytes}`)
      }
      const { format: _format, ...meta } = head
      return meta
    })
}

function decodeChunk(
  data: Uint8Array,
  onRecord: (direction: Direction, id: number, count: number, data: Uint8Array) => void,
): void {
  const buf = Buffer.from(data.buffer, data.byteOffset, data.byteLength)
  let off = 0
  while (off < buf.length) {
    if (off + RECORD_HEADER > buf.length) throw new Error('graph snapshot: truncated record header')
    const direction = buf.readUInt8(off)
    const id = buf.readUInt32LE(off + 1)
    const count = buf.readUInt32LE(off + 5)
    const end = off + RECORD_HEADER + buf.readUInt32LE(off + 9)
    if (direction !== 0 && direction !== 1) throw new Error('graph snapshot: bad direction')
    if (end > buf.length) throw new Error('graph snapshot: truncated record')
    onRecord(direction, id, count, buf.subarray(off + RECORD_HEADER, end))
    off = end
  }
}

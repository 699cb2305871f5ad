// The in-memory social graph's persisted state (@openplane/graph): additive, never read by the stock.
import { sql, type Kysely } from 'kysely'

export async function up(db: Kysely<unknown>): Promise<void> {
  // DIDs interned to dense u32 ids (roaring bitmaps hold ids, not strings). Ids come only from the
  // sequence and a DID's id never changes, so every process and every snapshot agrees on them.
  await sql`
    CREATE TABLE openplane_actor_id (
      id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      did varchar NOT NULL UNIQUE
    )
  `.execute(db)
  // One row per snapshot; its serialized bitmaps are chunked below (a bytea value cannot exceed
  // 1 GB). `cursor` is the caller's (the firehose seq the graph is consistent with), opaque here.
  await sql`
    CREATE TABLE openplane_graph_snapshot (
      id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      "takenAt" timestamptz NOT NULL DEFAULT now(),
      cursor bigint NOT NULL,
      "actorIdHighWater" integer NOT NULL,
      "edgeCount" bigint NOT NULL,
      "chunkCount" integer NOT NULL,
      bytes bigint NOT NULL,
      format smallint NOT NULL
    )
  `.execute(db)
  await sql`
    CREATE TABLE openplane_graph_snapshot_chunk (
      snapshot integer NOT NULL REFERENCES openplane_graph_snapshot (id) ON DELETE CASCADE,
      seq integer NOT NULL,
      data bytea NOT NULL,
      PRIMARY KEY (snapshot, seq)
    )
  `.execute(db)
  // Roaring data does not compress further: store it out of line without trying.
  await sql`
    ALTER TABLE openplane_graph_snapshot_chunk ALTER COLUMN data SET STORAGE EXTERNAL
  `.execute(db)
}

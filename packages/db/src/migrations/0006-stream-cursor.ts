// Cursors of the streams that are not repo firehoses: bsync's three operation scans now, each
// labeler's subscribeLabels later. Each is written in the transaction that applies what was read
// up to it, so a restart resumes exactly there. (openplane_cursor stays the firehose's: the graph
// and timelines replay from its rows.)
import { sql, type Kysely } from 'kysely'

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE openplane_stream_cursor (
      stream text PRIMARY KEY,
      cursor text NOT NULL,
      "updatedAt" timestamptz NOT NULL DEFAULT now()
    )
  `.execute(db)
}

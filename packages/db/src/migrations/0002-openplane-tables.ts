// Our additive tables: the stock has no counterpart, and the stock AppView never reads them.
import { sql, type Kysely } from 'kysely'

export async function up(db: Kysely<unknown>): Promise<void> {
  // The stock's firehose cursor lives only in memory (and its legacy `subscription` table is
  // unused), so a restart there replays from "now"; ours resumes per source (relay or PDS url).
  await sql`
    CREATE TABLE openplane_cursor (
      source text PRIMARY KEY,
      seq bigint NOT NULL,
      "updatedAt" timestamptz NOT NULL DEFAULT now()
    )
  `.execute(db)
}

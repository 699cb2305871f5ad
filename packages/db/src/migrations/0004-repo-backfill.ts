// Backfill state per repo (@openplane/backfill): additive, never read by the stock.
import { sql, type Kysely } from 'kysely'

export async function up(db: Kysely<unknown>): Promise<void> {
  // One row per repo a backfill was asked for. `pending` repos are fetched; `done` ones record the
  // rev their records were indexed at (written in the same transaction as the records, so a
  // killed backfill never marks a repo done that is not); `failed` ones keep the last reason and
  // are retried by the next run. `attempts` counts fetches, `host` is the PDS it was fetched from.
  await sql`
    CREATE TABLE openplane_repo (
      did text PRIMARY KEY,
      state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'done', 'failed')),
      rev text,
      host text,
      attempts integer NOT NULL DEFAULT 0,
      records integer,
      reason text,
      "enqueuedAt" timestamptz NOT NULL DEFAULT now(),
      "updatedAt" timestamptz NOT NULL DEFAULT now()
    )
  `.execute(db)
  // The worker looks for work among the few rows that are not done.
  await sql`
    CREATE INDEX openplane_repo_todo_idx ON openplane_repo ("enqueuedAt") WHERE state <> 'done'
  `.execute(db)
}

// Repos out of sync, retried on a schedule, and the live events held while a repo is fetched,
// kept across restarts (@openplane/backfill, @openplane/ingest's repo gate).
import { sql, type Kysely } from 'kysely'

export async function up(db: Kysely<unknown>): Promise<void> {
  // A failed repo is out of sync with its PDS: fetched again at `retryAt` (backoff grows with
  // each failure in a row), and `failedSince` says since when it has been failing. Failed repos
  // of earlier versions are due at once.
  await sql`
    ALTER TABLE openplane_repo
      ADD COLUMN "retryAt" timestamptz,
      ADD COLUMN "failedSince" timestamptz,
      ADD COLUMN failures integer NOT NULL DEFAULT 0
  `.execute(db)
  await sql`
    UPDATE openplane_repo SET "failedSince" = "updatedAt", failures = 1 WHERE state = 'failed'
  `.execute(db)
  await sql`
    CREATE INDEX openplane_repo_retry_idx ON openplane_repo ("retryAt" NULLS FIRST, did)
      WHERE state = 'failed'
  `.execute(db)
  // Live events of a repo being fetched, written in the transaction that moves the source's
  // cursor past them, and deleted in the one that applies them: a restart finds every event a
  // crash left held.
  await sql`
    CREATE TABLE openplane_held_event (
      source text NOT NULL,
      seq bigint NOT NULL,
      did text NOT NULL,
      event text NOT NULL,
      id bigserial NOT NULL,
      PRIMARY KEY (source, seq)
    )
  `.execute(db)
  await sql`CREATE INDEX openplane_held_event_did_idx ON openplane_held_event (did)`.execute(db)
}

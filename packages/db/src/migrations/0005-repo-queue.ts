// The backfill state table as a queue (@openplane/backfill, @openplane/community).
import { sql, type Kysely } from 'kysely'

export async function up(db: Kysely<unknown>): Promise<void> {
  // `purge`: a community deployment removes the account's index (it left the community); the row
  // goes with it.
  await sql`ALTER TABLE openplane_repo DROP CONSTRAINT openplane_repo_state_check`.execute(db)
  await sql`
    ALTER TABLE openplane_repo ADD CONSTRAINT openplane_repo_state_check
      CHECK (state IN ('pending', 'done', 'failed', 'purge'))
  `.execute(db)
  // The worker pages through the repos to fetch by (enqueuedAt, did): repos asked for in one
  // statement share their enqueuedAt, so an index on it alone made each page scan them all.
  await sql`DROP INDEX openplane_repo_todo_idx`.execute(db)
  await sql`
    CREATE INDEX openplane_repo_todo_idx ON openplane_repo ("enqueuedAt", did)
      WHERE state IN ('pending', 'failed')
  `.execute(db)
  // Accounts to purge are looked for at every round: an index of just them.
  await sql`
    CREATE INDEX openplane_repo_purge_idx ON openplane_repo ("enqueuedAt") WHERE state = 'purge'
  `.execute(db)
}

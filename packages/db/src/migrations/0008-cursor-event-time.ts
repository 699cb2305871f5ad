// The stream time of the last event a source's cursor moved past. A source that lost events for
// us (a cursor older than the relay's replay window) leaves a gap that starts there: the repos
// changed since then are fetched again (@openplane/backfill's gap repair).
import { sql, type Kysely } from 'kysely'

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE openplane_cursor ADD COLUMN "eventTime" timestamptz`.execute(db)
}

// Community deployments (@openplane/community): an account that left the community is queued for
// purging in the backfill state table, for whichever process holds the writer.
import { sql, type Kysely } from 'kysely'

export async function up(db: Kysely<unknown>): Promise<void> {
  // `purge`: the account's whole index is to be removed; its row goes with it.
  await sql`ALTER TABLE openplane_repo DROP CONSTRAINT openplane_repo_state_check`.execute(db)
  await sql`
    ALTER TABLE openplane_repo ADD CONSTRAINT openplane_repo_state_check
      CHECK (state IN ('pending', 'done', 'failed', 'purge'))
  `.execute(db)
}

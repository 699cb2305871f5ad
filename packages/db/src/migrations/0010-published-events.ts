// What the indexer committed, as Jetstream messages, for the `/subscribe` stream: written in the
// transaction that applies them (so a consumer never sees what the AppView cannot, and nothing
// is lost or doubled across a restart), read by every serving process, trimmed to the retained
// window. `time_us` is the cursor: unique, and increasing in commit order.
import { sql, type Kysely } from 'kysely'

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE openplane_published_event (
      time_us bigint PRIMARY KEY,
      did text NOT NULL,
      collection text,
      message text NOT NULL
    )
  `.execute(db)
}

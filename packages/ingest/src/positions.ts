// What a batch's transaction records last, before COMMIT, to say how far it got: a live source's
// cursor (with the live events it moves past that are held: repo-gate.ts), or what a backfill or
// purge marks. Each returns the transaction id, which tells later whether an unanswered COMMIT
// went through (settle.ts).
import { sql, type Kysely } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'
import type { IngestEvent } from './events.ts'
import { storeHeld } from './held-store.ts'

export type Position = (tx: Kysely<DatabaseSchema>) => Promise<string>

/**
 * A live source's position: its cursor, upserted, with the stream time of the last event it
 * moves past (kept when the batch had none), and the events held that it moves past.
 */
export function cursorPosition(
  source: string,
  cursor: number,
  held: IngestEvent[],
  eventTime?: string,
): Position {
  return async (tx) => {
    await storeHeld(tx, source, held)
    const time = eventTime && !Number.isNaN(Date.parse(eventTime)) ? eventTime : null
    const row = await tx
      .insertInto('openplane_cursor')
      .values({ source, seq: cursor, eventTime: time })
      .onConflict((oc) =>
        oc.column('source').doUpdateSet({
          seq: cursor,
          updatedAt: sql`now()`,
          eventTime: sql`coalesce(${time}::timestamptz, openplane_cursor."eventTime")`,
        }),
      )
      .returning(sql<string>`txid_current()::text`.as('xid'))
      .executeTakeFirst()
    // None only on a recorder (recorded.ts in @openplane/db), whose runner reads it instead.
    return row?.xid ?? ''
  }
}

/** A backfill's or purge's position: what `mark` records, and the transaction id. */
export function markedPosition(mark: (tx: Kysely<DatabaseSchema>) => Promise<void>): Position {
  return async (tx) => {
    await mark(tx)
    const { rows } = await sql<{ xid: string }>`select txid_current()::text as xid`.execute(tx)
    return rows[0]?.xid ?? ''
  }
}

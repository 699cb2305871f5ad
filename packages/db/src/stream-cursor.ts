// Cursors of streams other than repo firehoses (openplane_stream_cursor, migration 6): bsync's
// scans (`bsync:op`…) and each labeler's subscribeLabels (`labels:<did>`). A consumer saves its
// cursor in the transaction that applied what was read up to it.
import type { Kysely } from 'kysely'
import type { DatabaseSchema } from './schema.ts'

export async function saveStreamCursor(
  tx: Kysely<DatabaseSchema>,
  stream: string,
  cursor: string,
): Promise<void> {
  await tx
    .insertInto('openplane_stream_cursor')
    .values({ stream, cursor, updatedAt: new Date() })
    .onConflict((oc) => oc.column('stream').doUpdateSet({ cursor, updatedAt: new Date() }))
    .execute()
}

export async function readStreamCursor(
  db: Kysely<DatabaseSchema>,
  stream: string,
): Promise<string | undefined> {
  const row = await db
    .selectFrom('openplane_stream_cursor')
    .select('cursor')
    .where('stream', '=', stream)
    .executeTakeFirst()
  return row?.cursor
}

// The published-event log (openplane_published_event, migration 10): what the indexer committed,
// one Jetstream message per row, keyed by its cursor. The writer appends in the transaction that
// applies the events; serving processes read pages after a cursor; the indexing process trims
// what falls out of the retained window.
import { sql, type Kysely } from 'kysely'
import type { DatabaseSchema } from './schema.ts'
import { copyRows } from './copy.ts'
import { readStreamCursor, saveStreamCursor } from './stream-cursor.ts'

type Db = Kysely<DatabaseSchema>

const COLUMNS = ['time_us', 'did', 'collection', 'message'] as const

export interface PublishedEvent {
  timeUs: number
  did: string
  /** A commit's collection; null for identity and account messages. */
  collection: string | null
  /** The message's JSON text. */
  message: string
}

/**
 * Appends messages (cursors increasing, above every one stored) in one statement; as COPY where
 * the connection can (copy.ts).
 */
export async function appendPublished(
  tx: Db,
  events: PublishedEvent[],
  copy = false,
): Promise<void> {
  if (!events.length) return
  if (copy) {
    const rows = events.map((e) => ({
      time_us: e.timeUs,
      did: e.did,
      collection: e.collection,
      message: e.message,
    }))
    await copyRows(tx, 'openplane_published_event', COLUMNS, rows)
    return
  }
  await sql`
    insert into openplane_published_event (time_us, did, collection, message)
    select * from unnest(
      ${events.map((e) => String(e.timeUs))}::bigint[],
      ${events.map((e) => e.did)}::text[],
      ${events.map((e) => e.collection)}::text[],
      ${events.map((e) => e.message)}::text[]
    )
  `.execute(tx)
}

/** Up to `limit` messages after cursor `after`, oldest first. */
export async function readPublished(
  db: Db,
  after: number,
  limit: number,
): Promise<PublishedEvent[]> {
  const { rows } = await sql<{
    time_us: string
    did: string
    collection: string | null
    message: string
  }>`
    select time_us, did, collection, message from openplane_published_event
    where time_us > ${String(after)}::bigint order by time_us limit ${limit}
  `.execute(db)
  return rows.map((r) => ({
    timeUs: Number(r.time_us),
    did: r.did,
    collection: r.collection,
    message: r.message,
  }))
}

/** The oldest and newest cursors stored (undefined: none). */
export async function publishedRange(db: Db): Promise<{ first: number; last: number } | undefined> {
  const { rows } = await sql<{ first: string | null; last: string | null }>`
    select (select time_us from openplane_published_event order by time_us limit 1) as first,
           (select time_us from openplane_published_event order by time_us desc limit 1) as last
  `.execute(db)
  const row = rows[0]
  if (!row?.first || !row.last) return undefined
  return { first: Number(row.first), last: Number(row.last) }
}

/** Where the log's trims have reached (openplane_stream_cursor): the newest cursor deleted. */
const TRIMMED = 'published:trimmed'

/**
 * Deletes up to `limit` of the oldest messages with cursors before `before`, and records the
 * newest cursor deleted, in one transaction; returns how many went. In slices, so a large
 * backlog never holds one long delete beside the writer.
 */
export async function trimPublished(db: Db, before: number, limit: number): Promise<number> {
  return db.transaction().execute(async (tx) => {
    const { rows } = await sql<{ deleted: string; newest: string | null }>`
      with gone as (
        delete from openplane_published_event where time_us in (
          select time_us from openplane_published_event
          where time_us < ${String(before)}::bigint order by time_us limit ${limit}
        ) returning time_us
      )
      select count(*) as deleted, max(time_us) as newest from gone
    `.execute(tx)
    const { deleted, newest } = rows[0]!
    if (newest !== null) await saveStreamCursor(tx, TRIMMED, newest)
    return Number(deleted)
  })
}

/**
 * The newest cursor trims have deleted (0: none): a consumer that has read up to a cursor below
 * it has lost messages.
 */
export async function publishedTrimmed(db: Db): Promise<number> {
  return Number((await readStreamCursor(db, TRIMMED)) ?? 0)
}

// Held live events in Postgres (openplane_held_event): written in the transaction that moves a
// source's cursor past them, deleted in the one that applies them. Only a crash leaves rows
// behind, and a restart applies those first (Writer.recoverHeld). Events are kept as Lex JSON:
// records keep their CIDs and bytes through it.
import { lexParse, lexStringify } from '@atproto/lex-json'
import type { Kysely } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'
import { counter } from '@openplane/telemetry'
import type { IngestEvent } from './events.ts'

type Db = Kysely<DatabaseSchema>

/** Stored held events a restart could not read back (left out, logged). */
export const unreadableHeld = counter(
  'openplane_held_events_unreadable_total',
  'Held live events kept in Postgres that a restart could not read back',
)
type LexValue = Parameters<typeof lexStringify>[0]

export function encodeHeld(evt: IngestEvent): string {
  return lexStringify(evt as unknown as LexValue)
}

/** A stored event, or undefined when the text is not one (counted and left by the caller). */
export function decodeHeld(text: string): IngestEvent | undefined {
  let value: unknown
  try {
    value = lexParse(text)
  } catch {
    return undefined
  }
  if (!value || typeof value !== 'object') return undefined
  const evt = value as Partial<IngestEvent>
  if (typeof evt.type !== 'string' || typeof evt.seq !== 'number' || typeof evt.did !== 'string')
    return undefined
  return evt as IngestEvent
}

/** Keeps the batch's held events with its cursor (a retried batch writes none twice). */
export async function storeHeld(tx: Db, source: string, events: IngestEvent[]): Promise<void> {
  if (!events.length) return
  await tx
    .insertInto('openplane_held_event')
    .values(events.map((evt) => ({ source, seq: evt.seq, did: evt.did, event: encodeHeld(evt) })))
    .onConflict((oc) => oc.columns(['source', 'seq']).doNothing())
    .execute()
}

/** Forgets the repos' held events, in the transaction that writes them. */
export async function dropHeld(tx: Db, dids: string[]): Promise<void> {
  if (!dids.length) return
  await tx.deleteFrom('openplane_held_event').where('did', 'in', dids).execute()
}

export interface StoredHeld {
  id: number
  event: IngestEvent | undefined
}

/** Held events a crash left behind, in the order they were held, after `afterId`. */
export async function loadHeld(db: Db, afterId: number, limit: number): Promise<StoredHeld[]> {
  const rows = await db
    .selectFrom('openplane_held_event')
    .select(['id', 'event'])
    .where('id', '>', afterId)
    .orderBy('id')
    .limit(limit)
    .execute()
  return rows.map((r) => ({ id: Number(r.id), event: decodeHeld(r.event) }))
}

/** Forgets the held events up to `id`, in the transaction that applied them. */
export async function dropHeldUpTo(tx: Db, id: number): Promise<void> {
  await tx.deleteFrom('openplane_held_event').where('id', '<=', id).execute()
}

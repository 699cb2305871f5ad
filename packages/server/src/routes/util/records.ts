// Raw records from the `record` table as positional Record messages, the way the stock builds
// them: a missing uri still yields an entry (its bytes are the JSON `null`, its cid empty), and
// sortedAt is the earlier of the record's own createdAt and our indexedAt.
import { Timestamp, type PlainMessage } from '@bufbuild/protobuf'
import type { Kysely } from 'kysely'
import { anyOf, type DatabaseSchema, type RepoRecord } from '@openplane/db'
import type { Record as RecordMsg } from '@openplane/proto'
import { collectionOf } from './at-uri.ts'

export type RecordEntry = PlainMessage<RecordMsg>

export type RecordRow = Pick<RepoRecord, 'uri' | 'cid' | 'json' | 'indexedAt' | 'takedownRef'> & {
  tags: string[] | null
}

type RecordsRpc = (req: { uris: string[] }) => Promise<{ records: RecordEntry[] }>

/** A Get*Records rpc over one collection. */
export function recordsOf(db: Kysely<DatabaseSchema>, collection: string): RecordsRpc {
  return async (req) => ({ records: await getRecords(db, req.uris, collection) })
}

/**
 * One entry per requested uri, in order. With a collection, uris of other collections are not
 * looked up (they come back as missing); a malformed uri is refused.
 */
export async function getRecords(
  db: Kysely<DatabaseSchema>,
  uris: string[],
  collection?: string,
): Promise<RecordEntry[]> {
  const wanted = collection ? uris.filter((uri) => collectionOf(uri) === collection) : uris
  return recordEntries(uris, await fetchRows(db, wanted))
}

/** One entry per requested uri, in order, from the rows read for them. */
export function recordEntries(uris: string[], rows: RecordRow[]): RecordEntry[] {
  const byUri = new Map(rows.map((row) => [row.uri, row]))
  return uris.map((uri) => toEntry(byUri.get(uri)))
}

async function fetchRows(db: Kysely<DatabaseSchema>, uris: string[]): Promise<RecordRow[]> {
  const unique = [...new Set(uris)]
  if (!unique.length) return []
  return db
    .selectFrom('record')
    .where('uri', '=', anyOf(unique))
    .select(['uri', 'cid', 'json', 'indexedAt', 'takedownRef', 'tags'])
    .execute()
}

function toEntry(row: RecordRow | undefined): RecordEntry {
  const json = row ? row.json : 'null'
  const createdAt = timestampOf(claimedCreatedAt(json))
  const indexedAt = row?.indexedAt ? Timestamp.fromDate(new Date(row.indexedAt)) : undefined
  return {
    record: Buffer.from(json, 'utf8'),
    cid: row?.cid ?? '',
    createdAt,
    indexedAt,
    sortedAt: earlier(createdAt, indexedAt),
    takenDown: !!row?.takedownRef,
    takedownRef: row?.takedownRef ?? '',
    tags: row?.tags ?? [],
  }
}

// The record's own createdAt, read as leniently as JS `new Date(value)` reads it (the stock
// accepts anything Date accepts, numbers included).
function claimedCreatedAt(json: string): Date {
  const parsed: unknown = JSON.parse(json)
  const value =
    parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)
      ? (parsed as { createdAt?: unknown }).createdAt
      : undefined
  return new Date(value as string)
}

function timestampOf(date: Date): Timestamp | undefined {
  return Number.isNaN(date.getTime()) ? undefined : Timestamp.fromDate(date)
}

function earlier(a: Timestamp | undefined, b: Timestamp | undefined): Timestamp | undefined {
  if (!a) return b
  if (!b) return a
  return a.toDate() < b.toDate() ? a : b
}

// Create / update / delete of one record, with the stock's semantics, planned against the batch
// state: every valid record gets a `record` row; the plugin's primary row is inserted unless its
// key or a uniqueness rule makes it a duplicate (tracked in `duplicate_record` and promoted when
// the original goes); updates replace the index. Effects of a row count only when the row really
// changed, so counter deltas stay exact.
import { lexParse, lexStringify } from '@atproto/lex-json'
import type { RecordPlugin, RecordRef, Reader, TableName } from '@openplane/plugins'
import type { Plan } from './plan.ts'
import type { Row, Where } from './state.ts'

type LexValue = Parameters<typeof lexStringify>[0]
type AnyPlugin = RecordPlugin<unknown, TableName>
// Plugins see the state through the typed read-only view.
export const readerOf = (state: Plan['state']): Reader => state as unknown as Reader
const reader = (plan: Plan): Reader => readerOf(plan.state)

function insertPrimary(plan: Plan, plugin: AnyPlugin, ref: RecordRef, rec: unknown): Row | null {
  const values = plugin.toRow(reader(plan), ref, rec)
  if (!values) return null
  return plan.state.insertIfFree(plugin.table!, values as Row)
}

/**
 * Deletes the primary row at `uri`. What onDelete reads is read first, whether or not the row
 * exists: otherwise those keys are learnt only once the row is loaded, and every delete in the
 * batch costs a planning pass more.
 */
function deletePrimary(plan: Plan, plugin: AnyPlugin, uri: string): Row | null {
  for (const { table, where } of plugin.readsOnDelete?.(uri) ?? [])
    plan.state.note(table, where as Where)
  return plan.state.delete(plugin.table!, { uri })[0] ?? null
}

/** A record's JSON, written once however many passes plan it (or where it was decoded). */
const jsonCache = new WeakMap<object, string>()

export function rememberJson(rec: unknown, json: string): void {
  if (rec && typeof rec === 'object') jsonCache.set(rec, json)
}
/** The record's JSON as stored in `record.json` (and published). */
export function jsonOf(rec: unknown): string {
  if (!rec || typeof rec !== 'object') return lexStringify(rec as LexValue)
  let json = jsonCache.get(rec)
  if (json === undefined) jsonCache.set(rec, (json = lexStringify(rec as LexValue)))
  return json
}

const recordRow = (ref: RecordRef, rec: unknown): Row => ({
  uri: ref.uri,
  cid: ref.cid,
  did: ref.did,
  json: jsonOf(rec),
  indexedAt: ref.indexedAt,
})

export function createRecord(plan: Plan, plugin: AnyPlugin, ref: RecordRef, rec: unknown): void {
  const state = plan.state
  state.insertIfFree('record', recordRow(ref, rec))
  if (!plugin.table) return
  // Where the record may turn out a duplicate, its duplicate_record key is read up front (see
  // deletePrimary): a batch of likes then loads it with the first reads.
  if (plugin.findDuplicate) state.note('duplicate_record', { uri: ref.uri })
  const inserted = insertPrimary(plan, plugin, ref, rec)
  plan.applyRows(plugin.unconditional?.create(ref, rec))
  if (inserted) {
    plan.apply(plugin.onInsert(reader(plan), inserted as never, ref, rec))
    return
  }
  const dup = plugin.findDuplicate?.(reader(plan), ref, rec)
  if (dup && dup !== ref.uri) {
    state.insertIfFree('duplicate_record', {
      uri: ref.uri,
      cid: ref.cid,
      duplicateOf: dup,
      indexedAt: ref.indexedAt,
    })
  }
}

export function updateRecord(plan: Plan, plugin: AnyPlugin, ref: RecordRef, rec: unknown): void {
  const state = plan.state
  const updated = state.update(
    'record',
    { uri: ref.uri },
    { cid: ref.cid, json: jsonOf(rec), indexedAt: ref.indexedAt },
  )
  // A record-only collection has no index to replace. An update of a record never seen is a
  // create, except at rkey `self`: the stock's record-only plugins count a `self` record as
  // indexed whether or not it is, so its update writes nothing.
  if (!plugin.table) {
    if (!updated.length && ref.rkey !== 'self') createRecord(plan, plugin, ref, rec)
    return
  }
  const dup = plugin.findDuplicate?.(reader(plan), ref, rec)
  if (dup) {
    state.update(
      'duplicate_record',
      { uri: ref.uri },
      { cid: ref.cid, duplicateOf: dup, indexedAt: ref.indexedAt },
    )
  } else {
    state.delete('duplicate_record', { uri: ref.uri })
  }
  const deleted = deletePrimary(plan, plugin, ref.uri)
  if (plugin.unconditional) plan.apply(plugin.unconditional.delete(reader(plan), ref.uri))
  // An update of a record we never indexed is a plain create.
  if (!deleted) return createRecord(plan, plugin, ref, rec)
  const inserted = insertPrimary(plan, plugin, ref, rec)
  if (!inserted) throw new Error(`update of ${ref.uri} removed the row but could not replace it`)
  // An update notifies as "delete replaced by": the insert side adds rows and counts only. The
  // delete side's rows go first, as the stock's delete runs before its insert.
  plan.apply(plugin.onDelete(reader(plan), deleted as never, inserted as never, rec))
  plan.applyRows(plugin.unconditional?.create(ref, rec))
  plan.apply(plugin.onInsert(reader(plan), inserted as never, ref, rec), false)
}

export function deleteRecord(
  plan: Plan,
  plugin: AnyPlugin,
  uri: string,
  parse: (collection: string, record: unknown) => unknown,
): void {
  const state = plan.state
  state.delete('record', { uri })
  state.delete('duplicate_record', { uri })
  if (!plugin.table) return
  const promote = plugin.promoteDuplicateOnDelete !== false
  // Read before the row is known, like deletePrimary's reads.
  if (promote) state.note('duplicate_record', { duplicateOf: uri })
  const deleted = deletePrimary(plan, plugin, uri)
  if (plugin.unconditional) plan.apply(plugin.unconditional.delete(reader(plan), uri))
  if (!deleted) return
  let promoted: Row | null = null
  let promotedRef: RecordRef | undefined
  let promotedRec: unknown
  if (promote) {
    const found = oldestDuplicate(plan, uri)
    promotedRec = found ? tryParse(parse, plugin.collection, String(found.json)) : undefined
    if (found && promotedRec !== undefined) {
      const foundUri = String(found.uri)
      const [, collection = '', rkey = ''] = foundUri.replace('at://', '').split('/')
      promotedRef = {
        uri: foundUri,
        did: String(found.did),
        collection: collection || plugin.collection,
        rkey,
        cid: String(found.cid),
        indexedAt: String(found.indexedAt),
      }
      promoted = insertPrimary(plan, plugin, promotedRef, promotedRec)
    }
  }
  plan.apply(
    plugin.onDelete(
      reader(plan),
      deleted as never,
      promoted as never,
      promoted ? promotedRec : undefined,
    ),
  )
  if (promotedRef && promotedRec !== undefined) {
    // The stock re-indexes the promoted duplicate after the delete: its rows come last.
    plan.applyRows(plugin.unconditional?.create(promotedRef, promotedRec))
  }
  if (promoted && promotedRef) {
    plan.apply(plugin.onInsert(reader(plan), promoted as never, promotedRef, promotedRec), false)
  }
}

/** The record of the earliest-indexed duplicate of `uri` that still has one. */
function oldestDuplicate(plan: Plan, uri: string): Row | undefined {
  let best: { dup: Row; record: Row } | undefined
  for (const dup of plan.state.rows('duplicate_record', { duplicateOf: uri })) {
    const record = plan.state.first('record', { uri: dup.uri as string })
    if (!record) continue
    if (!best || String(dup.indexedAt) < String(best.dup.indexedAt)) best = { dup, record }
  }
  return best?.record
}

function tryParse(
  parse: (collection: string, record: unknown) => unknown,
  collection: string,
  json: string,
): unknown {
  try {
    return parse(collection, lexParse(json))
  } catch {
    return undefined
  }
}

// Create / update / delete of one record, with the stock's semantics: every valid record gets a
// `record` row; the plugin's primary row is inserted unless a uniqueness rule makes it a duplicate
// (tracked in `duplicate_record` and promoted when the original goes); updates replace the index.
// Effects of a row count only when the row really changed, so counter deltas stay exact.
import type { Kysely, Selectable } from 'kysely'
import { lexParse, lexStringify } from '@atproto/lex-json'

type LexValue = Parameters<typeof lexStringify>[0]
import type { DatabaseSchema } from '@openplane/db'
import type { Effects, RecordPlugin, RecordRef, TableName, Tables } from '@openplane/plugins'
import type { ChangeLog } from './changes.ts'
import { applyRows, type CounterBuffer, type NotificationBuffer } from './effects.ts'

type Db = Kysely<DatabaseSchema>
type AnyPlugin = RecordPlugin<unknown, TableName>
type Row = Selectable<Tables[TableName]>
type FollowRow = Selectable<Tables['follow']>

export interface RecordContext {
  db: Db
  counters: CounterBuffer
  notifications: NotificationBuffer
  changes: ChangeLog
}

/** Primary rows other stores follow (the follow graph). */
function notePrimary(ctx: RecordContext, table: TableName, op: 'insert' | 'delete', row: Row) {
  if (table === 'follow') ctx.changes.add({ table, op, row: row as FollowRow })
}

async function apply(ctx: RecordContext, effects: Effects, notify = true): Promise<void> {
  await applyRows(ctx.db, effects.rows, ctx.changes)
  ctx.counters.add(effects.counters)
  if (notify) {
    await ctx.notifications.apply(ctx.db, effects.deleteNotificationsFor, effects.notifications)
  }
}

async function insertPrimary(ctx: RecordContext, plugin: AnyPlugin, ref: RecordRef, rec: unknown) {
  const values = await plugin.toRow(ctx.db, ref, rec)
  if (!values) return null
  const inserted = await ctx.db
    .insertInto(plugin.table!)
    .values(values as never)
    .onConflict((oc) => oc.doNothing())
    .returningAll()
    .executeTakeFirst()
  if (inserted) notePrimary(ctx, plugin.table!, 'insert', inserted as Row)
  return (inserted as Row | undefined) ?? null
}

async function deletePrimary(ctx: RecordContext, plugin: AnyPlugin, uri: string) {
  const deleted = await ctx.db
    .deleteFrom(plugin.table!)
    .where('uri' as never, '=', uri as never)
    .returningAll()
    .executeTakeFirst()
  if (deleted) notePrimary(ctx, plugin.table!, 'delete', deleted as Row)
  return (deleted as Row | undefined) ?? null
}

export async function createRecord(
  ctx: RecordContext,
  plugin: AnyPlugin,
  ref: RecordRef,
  rec: unknown,
): Promise<void> {
  await ctx.db
    .insertInto('record')
    .values({
      uri: ref.uri,
      cid: ref.cid,
      did: ref.did,
      json: lexStringify(rec as LexValue),
      indexedAt: ref.indexedAt,
    })
    .onConflict((oc) => oc.doNothing())
    .execute()
  if (!plugin.table) return
  const inserted = await insertPrimary(ctx, plugin, ref, rec)
  await applyRows(ctx.db, plugin.unconditional?.create(ref, rec), ctx.changes)
  if (inserted) {
    await apply(ctx, await plugin.onInsert(ctx.db, inserted, ref, rec))
    return
  }
  const dup = await plugin.findDuplicate?.(ctx.db, ref, rec)
  if (dup && dup !== ref.uri) {
    await ctx.db
      .insertInto('duplicate_record')
      .values({ uri: ref.uri, cid: ref.cid, duplicateOf: dup, indexedAt: ref.indexedAt })
      .onConflict((oc) => oc.doNothing())
      .execute()
  }
}

export async function updateRecord(
  ctx: RecordContext,
  plugin: AnyPlugin,
  ref: RecordRef,
  rec: unknown,
): Promise<void> {
  const updated = await ctx.db
    .updateTable('record')
    .where('uri', '=', ref.uri)
    .set({ cid: ref.cid, json: lexStringify(rec as LexValue), indexedAt: ref.indexedAt })
    .executeTakeFirst()
  // A record-only collection has no index to replace. An update of a record never seen is a
  // create, except at rkey `self`: the stock's record-only plugins count a `self` record as
  // indexed whether or not it is, so its update writes nothing.
  if (!plugin.table) {
    if (!updated.numUpdatedRows && ref.rkey !== 'self') await createRecord(ctx, plugin, ref, rec)
    return
  }
  const dup = await plugin.findDuplicate?.(ctx.db, ref, rec)
  if (dup) {
    await ctx.db
      .updateTable('duplicate_record')
      .where('uri', '=', ref.uri)
      .set({ cid: ref.cid, duplicateOf: dup, indexedAt: ref.indexedAt })
      .execute()
  } else {
    await ctx.db.deleteFrom('duplicate_record').where('uri', '=', ref.uri).execute()
  }
  const deleted = await deletePrimary(ctx, plugin, ref.uri)
  if (plugin.unconditional) await apply(ctx, await plugin.unconditional.delete(ctx.db, ref.uri))
  // An update of a record we never indexed is a plain create.
  if (!deleted) return createRecord(ctx, plugin, ref, rec)
  const inserted = await insertPrimary(ctx, plugin, ref, rec)
  if (!inserted) throw new Error(`update of ${ref.uri} removed the row but could not replace it`)
  // An update notifies as "delete replaced by": the insert side adds rows and counts only. The
  // delete side's rows go first, as the stock's delete runs before its insert.
  await apply(ctx, await plugin.onDelete(ctx.db, deleted, inserted, rec))
  await applyRows(ctx.db, plugin.unconditional?.create(ref, rec), ctx.changes)
  await apply(ctx, await plugin.onInsert(ctx.db, inserted, ref, rec), false)
}

export async function deleteRecord(
  ctx: RecordContext,
  plugin: AnyPlugin,
  uri: string,
  parse: (collection: string, record: unknown) => unknown,
): Promise<void> {
  await ctx.db.deleteFrom('record').where('uri', '=', uri).execute()
  await ctx.db.deleteFrom('duplicate_record').where('uri', '=', uri).execute()
  if (!plugin.table) return
  const deleted = await deletePrimary(ctx, plugin, uri)
  if (plugin.unconditional) await apply(ctx, await plugin.unconditional.delete(ctx.db, uri))
  if (!deleted) return
  let promoted: Row | null = null
  let promotedRef: RecordRef | undefined
  let promotedRec: unknown
  if (plugin.promoteDuplicateOnDelete !== false) {
    const found = await ctx.db
      .selectFrom('duplicate_record')
      .innerJoin('record', 'record.uri', 'duplicate_record.uri')
      .where('duplicateOf', '=', uri)
      .orderBy('duplicate_record.indexedAt', 'asc')
      .limit(1)
      .select(['record.uri', 'record.cid', 'record.did', 'record.json', 'record.indexedAt'])
      .executeTakeFirst()
    promotedRec = found ? tryParse(parse, plugin.collection, found.json) : undefined
    if (found && promotedRec !== undefined) {
      const [, collection = '', rkey = ''] = found.uri.replace('at://', '').split('/')
      promotedRef = {
        uri: found.uri,
        did: found.did,
        collection: collection || plugin.collection,
        rkey,
        cid: found.cid,
        indexedAt: found.indexedAt,
      }
      promoted = await insertPrimary(ctx, plugin, promotedRef, promotedRec)
    }
  }
  await apply(
    ctx,
    await plugin.onDelete(ctx.db, deleted, promoted, promoted ? promotedRec : undefined),
  )
  if (promotedRef && promotedRec !== undefined) {
    // The stock re-indexes the promoted duplicate after the delete: its rows come last.
    await applyRows(ctx.db, plugin.unconditional?.create(promotedRef, promotedRec), ctx.changes)
  }
  if (promoted && promotedRef) {
    await apply(ctx, await plugin.onInsert(ctx.db, promoted, promotedRef, promotedRec), false)
  }
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

export interface CreateItem {
  plugin: AnyPlugin
  ref: RecordRef
  rec: unknown
}

/**
 * Creates a run of records of `independent` plugins with one statement per table instead of per
 * record; outcomes equal creating them one by one in order (a second record competing for the
 * same uniqueness slot loses to the first, and becomes its duplicate).
 */
export async function createRecords(ctx: RecordContext, items: CreateItem[]): Promise<void> {
  if (!items.length) return
  for (let i = 0; i < items.length; i += 500) {
    await ctx.db
      .insertInto('record')
      .values(
        items.slice(i, i + 500).map(({ ref, rec }) => ({
          uri: ref.uri,
          cid: ref.cid,
          did: ref.did,
          json: lexStringify(rec as LexValue),
          indexedAt: ref.indexedAt,
        })),
      )
      .onConflict((oc) => oc.doNothing())
      .execute()
  }
  const values = await Promise.all(
    items.map(({ plugin, ref, rec }) => (plugin.table ? plugin.toRow(ctx.db, ref, rec) : null)),
  )
  const byTable = new Map<TableName, unknown[]>()
  for (const [i, { plugin }] of items.entries()) {
    if (plugin.table && values[i])
      byTable.set(plugin.table, [...(byTable.get(plugin.table) ?? []), values[i]])
  }
  // Rows are inserted in run order; "do nothing" skips a row that conflicts with an earlier one.
  const inserted = new Map<string, Row>()
  for (const [table, rows] of byTable) {
    for (let i = 0; i < rows.length; i += 500) {
      const got = await ctx.db
        .insertInto(table)
        .values(rows.slice(i, i + 500) as never)
        .onConflict((oc) => oc.doNothing())
        .returningAll()
        .execute()
      for (const row of got as Row[]) {
        inserted.set((row as { uri: string }).uri, row)
        notePrimary(ctx, table, 'insert', row)
      }
    }
  }
  const position = new Map(items.map(({ ref }, i) => [ref.uri, i]))
  const rows: Effects['rows'] = []
  for (const [i, { plugin, ref, rec }] of items.entries()) {
    if (!plugin.table) continue
    rows.push(...(plugin.unconditional?.create(ref, rec) ?? []))
    const row = values[i] ? inserted.get(ref.uri) : undefined
    if (row) {
      const effects = await plugin.onInsert(ctx.db, row, ref, rec)
      rows.push(...(effects.rows ?? []))
      ctx.counters.add(effects.counters)
      await ctx.notifications.apply(ctx.db, effects.deleteNotificationsFor, effects.notifications)
      continue
    }
    if (!values[i]) continue
    const dup = await plugin.findDuplicate?.(ctx.db, ref, rec)
    // A row written by a later record of the run did not exist yet at this one: no duplicate.
    const later = !!dup && inserted.has(dup) && (position.get(dup) ?? -1) > i
    if (dup && dup !== ref.uri && !later) {
      rows.push({
        kind: 'insert',
        table: 'duplicate_record',
        values: { uri: ref.uri, cid: ref.cid, duplicateOf: dup, indexedAt: ref.indexedAt },
      })
    }
  }
  await applyRows(ctx.db, rows, ctx.changes)
}

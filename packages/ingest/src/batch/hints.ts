// Reads a range's steps will make, asked for before the first planning pass. Planning learns what
// a step reads by running it: a read of something not loaded answers "nothing" and is noted, the
// step is undone, and after the load planning resumes at the first step that missed, running
// every step after it again. In a batch of new records nearly every step misses on its first
// read (its own `record` row), so every step ran at least twice. Here each record op's obvious
// reads are asked for without running it: its `record` row, its row in the collection's table,
// the duplicate slot, and whatever the plugin reads to build the row, find a duplicate or delete
// it (which may itself read rows not loaded yet: asked again after each load, a few rounds).
//
// Hints change what is loaded early, never what is planned: a read they miss is found by the
// planner as before, and a key they ask for needlessly is one more row read.
import {
  pluginFor,
  type RecordPlugin,
  type Reader,
  type RowWrite,
  type TableName,
} from '@openplane/plugins'
import { refOf } from '../checks.ts'
import type { IngestEvent } from '../events.ts'
import type { SchemaInfo } from './schema.ts'
import type { BatchState, Row, Where } from './state.ts'
import type { Prepared } from './steps.ts'

type AnyPlugin = RecordPlugin<unknown, TableName>

/** Rounds of hints at most: each follows reads learnt from rows the round before loaded. */
const ROUNDS = 3

/** Loads what the events [from, to) will read, as far as their hints tell. */
export async function loadHinted(
  state: BatchState,
  schema: SchemaInfo,
  batch: IngestEvent[],
  from: number,
  to: number,
  prepared: Pick<Prepared, 'handles'>,
): Promise<void> {
  for (let round = 0; round < ROUNDS; round++) {
    const misses = state.missCount
    for (let i = from; i < to; i++) {
      const handle = prepared.handles.get(i)
      if (handle) hintHandle(state, handle.did, handle.handle)
      const evt = batch[i]!
      if (evt.type !== 'commit') continue
      for (const op of evt.ops) hint(state, schema, evt, op)
    }
    if (state.missCount === misses || !state.pending) return
    await state.load()
  }
}

function hint(
  state: BatchState,
  schema: SchemaInfo,
  evt: Extract<IngestEvent, { type: 'commit' }>,
  op: Extract<IngestEvent, { type: 'commit' }>['ops'][number],
): void {
  const plugin = pluginFor(op.collection) as AnyPlugin | undefined
  if (!plugin) return
  const ref = refOf(evt, op)
  const reader = state as unknown as Reader
  state.rows('record', { uri: ref.uri })
  state.rows('duplicate_record', { uri: ref.uri })
  if (!plugin.table) return
  state.rows(plugin.table, { uri: ref.uri })
  if (op.action === 'delete') {
    if (plugin.promoteDuplicateOnDelete !== false)
      state.rows('duplicate_record', { duplicateOf: ref.uri })
    for (const { table, where } of plugin.readsOnDelete?.(ref.uri) ?? [])
      state.rows(table, where as Where)
    try {
      keyed(state, schema, plugin.unconditional?.delete(reader, ref.uri).rows)
      // Once its row is loaded (a later round), what deleting it reads and writes.
      const row = state.first(plugin.table, { uri: ref.uri })
      if (row) keyed(state, schema, plugin.onDelete(reader, row as never, null).rows)
    } catch {
      // As for creates: hints only read.
    }
    return
  }
  // Only records already checked where the frame was decoded: their record is the parsed one.
  if (!op.checked || 'invalid' in op.checked) return
  const rec = op.record
  try {
    keyed(state, schema, plugin.unconditional?.create(ref, rec))
    const row = plugin.toRow(reader, ref, rec) as Row | null
    if (!row) return
    const info = schema.get(plugin.table)
    for (const unique of info ? info.unique : []) {
      const where: Where = {}
      for (const c of unique) where[c] = (row[c] ?? null) as Where[string]
      if (Object.values(where).every((v) => v !== null)) state.rows(plugin.table, where)
    }
    plugin.findDuplicate?.(reader, ref, rec)
    // The rows its insert adds (embeds, feed items): each insert reads its slot first.
    keyed(state, schema, plugin.onInsert(reader, row as never, ref, rec).rows)
  } catch {
    // The step itself will say why (an invalid reply, say): hints only read.
  }
}

/** The reads of effect rows: an insert's key, an update's or delete's rows. */
function keyed(state: BatchState, schema: SchemaInfo, rows: RowWrite[] | undefined): void {
  for (const row of rows ?? []) {
    if (row.kind !== 'insert') {
      state.rows(row.table, row.where as Where)
      continue
    }
    const primary = schema.get(row.table)?.primary
    if (!primary?.length) continue
    const where: Where = {}
    for (const c of primary) where[c] = ((row.values as Row)[c] ?? null) as Where[string]
    state.rows(row.table, where)
  }
}

/** A handle step's reads: the actor, and whoever holds the handle now. */
export function hintHandle(state: BatchState, did: string, handle: string | null): void {
  state.rows('actor', { did })
  if (handle !== null) state.rows('actor', { handle })
}

// Reads a range's steps will make, asked for before the first planning pass. Planning learns what
// a step reads by running it: a read of something not loaded answers "nothing" and is noted, the
// step is undone, and after the load planning resumes at the first step that missed, running
// every step after it again. In a batch of new records nearly every step misses on its first
// read (its own `record` row), so every step ran at least twice. Here each step's obvious reads
// are asked for without running it, in a few rounds with a load after each: first what it names
// outright (a handle's actor rows; a record op's `record` row, its row in the collection's table,
// its duplicate slots), then, once those are loaded, what the plugin reads to build, find a
// duplicate of or delete its row, and the keys of the rows its insert adds; then again for the
// ops whose reads the round before missed.
//
// Hints change what is loaded early, never what is planned: a read they miss is found by the
// planner as before, and a key they ask for needlessly is one more row read.
import {
  pluginFor,
  type RecordPlugin,
  type RecordRef,
  type Reader,
  type RowWrite,
  type TableName,
} from '@openplane/plugins'
import { refOf } from '../checks.ts'
import type { CommitOp, IngestEvent } from '../events.ts'
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
  // The first round asks only for what the ops name outright: until their rows are loaded, what
  // a plugin would read from them is not known. Later rounds ask again for the ops whose hints
  // missed the round before.
  let ops: Op[] = []
  for (let i = from; i < to; i++) {
    const handle = prepared.handles.get(i)
    if (handle) hintHandle(state, handle.did, handle.handle)
    const evt = batch[i]!
    if (evt.type !== 'commit') continue
    for (const op of evt.ops) {
      const plugin = pluginFor(op.collection) as AnyPlugin | undefined
      if (!plugin) continue
      const ref = refOf(evt, op)
      named(state, plugin, ref.uri, op.action)
      ops.push({ plugin, ref, op })
    }
  }
  for (let round = 1; round < ROUNDS && ops.length; round++) {
    if (state.pending) await state.load()
    const missed: Op[] = []
    for (const o of ops) {
      const misses = state.missCount
      derived(state, schema, o)
      if (state.missCount !== misses) missed.push(o)
    }
    ops = missed
  }
  if (state.pending) await state.load()
}

interface Op {
  plugin: AnyPlugin
  ref: RecordRef
  op: CommitOp
}

/** What an op reads by its uri alone. */
function named(state: BatchState, plugin: AnyPlugin, uri: string, action: CommitOp['action']) {
  state.rows('record', { uri })
  state.rows('duplicate_record', { uri })
  if (!plugin.table) return
  state.rows(plugin.table, { uri })
  if (action !== 'delete') return
  if (plugin.promoteDuplicateOnDelete !== false)
    state.rows('duplicate_record', { duplicateOf: uri })
  for (const { table, where } of plugin.readsOnDelete?.(uri) ?? [])
    state.rows(table, where as Where)
}

/** What an op's plugin reads to build, find a duplicate of, or delete its row, and the keys of
 * the rows that adds. */
function derived(state: BatchState, schema: SchemaInfo, { plugin, ref, op }: Op): void {
  if (!plugin.table) return
  const reader = state as unknown as Reader
  try {
    if (op.action === 'delete') {
      keyed(state, schema, plugin.unconditional?.delete(reader, ref.uri).rows)
      const row = state.first(plugin.table, { uri: ref.uri })
      if (row) keyed(state, schema, plugin.onDelete(reader, row as never, null).rows)
      return
    }
    // Only records already checked where the frame was decoded: their record is the parsed one.
    if (!op.checked || 'invalid' in op.checked) return
    const rec = op.record
    keyed(state, schema, plugin.unconditional?.create(ref, rec))
    const row = plugin.toRow(reader, ref, rec) as Row | null
    if (!row) return
    for (const unique of schema.get(plugin.table)?.unique ?? []) {
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

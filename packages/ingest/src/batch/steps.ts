// A batch's events as planning steps, in firehose order: a handle to write, each record op of a
// commit, the repo's last commit, an account's upstream status. Each step counts its outcome into
// the plan, so a step undone leaves no count behind.
import {
  InvalidRecordError,
  pluginFor,
  parseRecord,
  type RecordPlugin,
  type RecordRef,
  type RowWrite,
  type TableName,
} from '@openplane/plugins'
import { childLogger, counter, Tally } from '@openplane/telemetry'
import { refOf } from '../checks.ts'
import type { CommitOp, IngestEvent } from '../events.ts'
import type { Plan } from './plan.ts'
import type { Step } from './planner.ts'
import { createRecord, deleteRecord, readerOf, rememberJson, updateRecord } from './records.ts'
import type { BatchState, Row, Where } from './state.ts'

const log = childLogger('writer')
export const opsTotal = counter(
  'openplane_indexer_ops_total',
  'Record operations by collection and outcome',
  ['collection', 'action', 'outcome'],
)
export const eventsTotal = counter(
  'openplane_indexer_events_total',
  'Firehose events by type and outcome',
  ['type', 'outcome'],
)
/** The two counters' increments, one function per set of labels (counted per op and event). */
const opCount = new Tally(opsTotal, ['collection', 'action', 'outcome'])
const eventCount = new Tally(eventsTotal, ['type', 'outcome'])

/** Network work done for a batch before its transaction. */
export interface Prepared {
  /** Handle to write at this event index. */
  handles: Map<number, { did: string; handle: string | null }>
  /**
   * Indexes of account events whose deletion is confirmed (the PDS no longer hosts the repo), and
   * of purges.
   */
  deletions: Set<number>
  /** Handle and check time of the batch's actors as it leaves them (null: deleted). */
  actors: Map<string, { handle: string | null; indexedAt: string } | null>
  /** Verified handles the batch writes → the actor holding each when it is done. */
  claimed: Map<string, string>
  /** Each repo's rev as the batch leaves it (chain.ts). */
  revs: Map<string, string>
  /** Repos whose events show them out of sync with the index (chain.ts): to fetch again. */
  outOfSync: Set<string>
  /** Creates whose rows are known absent before the batch (absent-creates.ts). */
  absent: ReadonlySet<CommitOp>
}

type Commit = Extract<IngestEvent, { type: 'commit' }>

/** The steps of events [from, to) of the batch; account deletions are not steps (barriers). */
export function stepsFor(
  batch: IngestEvent[],
  from: number,
  to: number,
  prepared: Prepared,
): Step[] {
  const steps: Step[] = []
  for (let index = from; index < to; index++) {
    const evt = batch[index]!
    const handle = prepared.handles.get(index)
    if (handle) steps.push(handleStep(handle.did, handle.handle, evt.time))
    switch (evt.type) {
      case 'skip':
        break
      case 'commit':
        // The stock handles ops, not commits: a commit without ops leaves no trace.
        if (!evt.ops.length) break
        for (const op of evt.ops) steps.push(new OpStep(evt, op))
        steps.push(done(evt, (plan) => plan.seen.push(evt)))
        break
      case 'sync':
        steps.push(done(evt, (plan) => plan.seen.push(evt)))
        break
      case 'identity': {
        const verified = handle?.handle ?? undefined
        steps.push(
          done(evt, (plan) => plan.applied.push({ kind: 'identity', evt, handle: verified })),
        )
        break
      }
      case 'account':
        steps.push(accountStep(evt))
        break
      case 'purge':
        // Always a barrier (Prepared.deletions), never a step.
        break
    }
  }
  return steps
}

/** An event's last step: counts it applied. */
function done(evt: IngestEvent, run: (plan: Plan) => void): Step {
  return {
    run(plan) {
      run(plan)
      plan.later.push(eventCount.of(evt.type, 'applied'))
    },
    failed: eventFailed(evt),
  }
}

function eventFailed(evt: IngestEvent) {
  return (plan: Plan, err: unknown) => {
    plan.later.push(() => eventsTotal.inc({ type: evt.type, outcome: 'error' }))
    plan.later.push(() => log.error({ err, seq: evt.seq, did: evt.did }, 'event skipped'))
  }
}

/** The stock's handle write: a verified handle held by another actor is taken from it. */
function handleStep(did: string, handle: string | null, time: string): Step {
  return {
    reads({ state }) {
      if (handle !== null) state.note('actor', { handle })
      state.note('actor', { did })
    },
    run({ state }) {
      if (handle !== null) {
        for (const other of state.rows('actor', { handle })) {
          if (other.did !== did)
            state.update('actor', { did: other.did as string }, { handle: null })
        }
      }
      const existing = state.first('actor', { did })
      state.put('actor', { ...existing, did, handle, indexedAt: time })
    },
    failed(plan, err) {
      plan.later.push(() => log.error({ err, did }, 'handle not written'))
    },
  }
}

function accountStep(evt: Extract<IngestEvent, { type: 'account' }>): Step {
  return {
    run(plan) {
      let upstreamStatus: string | null = null
      if (!evt.active) {
        const status = evt.status
        if (!status || !['deactivated', 'suspended', 'takendown'].includes(status)) {
          const message = `unrecognized account status: ${status ?? '(none)'}`
          plan.later.push(() => eventsTotal.inc({ type: 'account', outcome: 'invalid' }))
          plan.later.push(() => log.warn({ did: evt.did, status }, message))
          return
        }
        upstreamStatus = status
      }
      setUpstreamStatus(plan.state, evt.did, upstreamStatus)
      plan.applied.push({ kind: 'account', evt, deleted: false })
      plan.later.push(() => eventsTotal.inc({ type: 'account', outcome: 'applied' }))
    },
    failed: eventFailed(evt),
  }
}

function setUpstreamStatus(state: BatchState, did: string, upstreamStatus: string | null): void {
  state.update('actor', { did }, { upstreamStatus })
}

/**
 * A record op. A class, not an object of closures: a batch makes one per op, and the closures
 * with their shared context were several allocations each.
 */
class OpStep implements Step {
  private readonly evt: Commit
  private readonly op: CommitOp
  private readonly ref: RecordRef
  private readonly plugin: RecordPlugin<unknown, TableName> | undefined
  /** The collection as counted: `other` for one no plugin indexes. */
  private readonly collection: string
  private parsed: { rec: unknown } | { err: unknown } | undefined

  constructor(evt: Commit, op: CommitOp) {
    this.evt = evt
    this.op = op
    this.ref = refOf(evt, op)
    this.plugin = pluginFor(op.collection)
    this.collection = this.plugin ? op.collection : 'other'
  }

  /** Checked once, where the frame was decoded or here: planning may run the step again. */
  private parse(p: RecordPlugin<unknown, TableName>): { rec: unknown } | { err: unknown } {
    const { op, ref } = this
    return (this.parsed ??= op.checked
      ? checkedAtDecode(op.record, op.checked)
      : parseOnce(() => {
          const rec = p.parse(op.record)
          p.check?.(ref, rec)
          return rec
        }))
  }

  /**
   * Everything the step is known to read, its own rows included, noted before planning: the
   * batch loads it in one round, and the steps then run once instead of missing first.
   */
  reads(plan: Plan): void {
    const plugin = this.plugin
    if (!plugin) return
    try {
      readsOfOp(plan.state, plugin, this.op, this.ref, () => this.parse(plugin))
    } catch {
      // Only a hint: whatever is wrong with the record, the step meets and reports it.
    }
  }

  run(plan: Plan): void {
    const { evt, op, plugin, collection } = this
    if (!plugin) {
      plan.later.push(opCount.of(collection, op.action, 'ignored'))
      return
    }
    if (op.action === 'delete') {
      deleteRecord(plan, plugin, this.ref.uri, parseRecord)
      plan.applied.push({ kind: 'commit', evt, op })
      plan.later.push(opCount.of(collection, op.action, 'applied'))
      return
    }
    try {
      const got = this.parse(plugin)
      if ('err' in got) throw got.err
      const rec = got.rec
      if (op.action === 'create') createRecord(plan, plugin, this.ref, rec)
      else updateRecord(plan, plugin, this.ref, rec)
    } catch (err) {
      // The record is dropped whole, `record` row included: the planner undoes the step.
      if (err instanceof InvalidRecordError) throw new Dropped(err.message)
      throw err
    }
    plan.applied.push({ kind: 'commit', evt, op })
    plan.later.push(opCount.of(collection, op.action, 'applied'))
  }

  failed(plan: Plan, err: unknown): void {
    const { op, collection } = this
    const uri = this.ref.uri
    if (err instanceof Dropped) {
      const reason = err.message
      plan.later.push(opCount.of(collection, op.action, 'invalid'))
      plan.later.push(() => log.warn({ uri, reason }, 'invalid record skipped'))
      return
    }
    plan.later.push(opCount.of(collection, op.action, 'error'))
    plan.later.push(() => log.error({ err, uri }, 'record skipped'))
  }
}

function checkedAtDecode(
  record: unknown,
  checked: NonNullable<CommitOp['checked']>,
): { rec: unknown } | { err: unknown } {
  if ('invalid' in checked) return { err: new InvalidRecordError(checked.invalid) }
  rememberJson(record, checked.json)
  return { rec: record }
}

function parseOnce(parse: () => unknown): { rec: unknown } | { err: unknown } {
  try {
    return { rec: parse() }
  } catch (err) {
    return { err }
  }
}

/** What a record op reads when it runs, noted (nothing is written): see opStep's `reads`. */
function readsOfOp(
  state: BatchState,
  plugin: RecordPlugin<unknown, TableName>,
  op: CommitOp,
  ref: RecordRef,
  parse: () => { rec: unknown } | { err: unknown },
): void {
  const uri = ref.uri
  state.note('record', { uri })
  if (op.action !== 'create') {
    state.note('duplicate_record', { uri })
    if (plugin.table) {
      // A delete promotes the oldest duplicate in the record's place.
      if (op.action === 'delete' && plugin.promoteDuplicateOnDelete !== false) {
        state.note('duplicate_record', { duplicateOf: uri })
      }
      state.note(plugin.table, { uri })
      for (const { table, where } of plugin.readsOnDelete?.(uri) ?? []) {
        state.note(table, where as Where)
      }
      if (plugin.unconditional)
        readsOf(state, plugin.unconditional.delete(readerOf(state), uri).rows)
    }
    if (op.action === 'delete') return
  }
  const got = parse()
  if ('err' in got) return
  readsOf(state, plugin.unconditional?.create(ref, got.rec))
  for (const { table, where } of plugin.readsOnCreate?.(ref, got.rec) ?? []) {
    state.note(table, where as Where)
  }
  if (!plugin.table) return
  state.note(plugin.table, { uri })
  if (plugin.findDuplicate) {
    state.note('duplicate_record', { uri })
    plugin.findDuplicate(readerOf(state), ref, got.rec)
  }
  readsOf(state, plugin.insertsOnCreate?.(ref, got.rec))
}

/** Notes the reads that applying `rows` makes (a hint: nothing is written). */
function readsOf(state: BatchState, rows: RowWrite[] | undefined): void {
  for (const row of rows ?? []) {
    if (row.kind === 'insert') state.readSlots(row.table, row.values as Row)
    else state.note(row.table, row.where as Where)
  }
}

/** A record the lexicon or the stock's rules refuse: skipped and counted as invalid. */
class Dropped extends Error {}

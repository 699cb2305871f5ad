// One attempt at a batch inside its transaction: the events between account deletions are planned
// and applied as one range each (read what the range needs, plan the rows, apply each table
// once); each deletion is applied between them. In isolating mode every range sits behind a
// savepoint and a range the database refuses is halved until the events at fault stand alone, to
// be skipped.
import { sql, type Kysely } from 'kysely'
import { copyRows, eachValue, type DatabaseSchema } from '@openplane/db'
import { pluginFor, type NotificationRow } from '@openplane/plugins'
import { childLogger, counter, histogram } from '@openplane/telemetry'
import { deleteAccount, purgeLeftovers, setCommitsLastSeen } from '../actors.ts'
import { WATCHED, type Change, type FeedItemValues } from '../changes.ts'
import type { Applied } from './applied.ts'
import type { CommittedPart, CommittedRows, PlannedPart } from './committed-rows.ts'
import { CounterBuffer } from './counters.ts'
import type { IngestEvent } from '../events.ts'
import { absentBefore } from './absent.ts'
import { applyWrites } from './apply.ts'
import { Plan } from './plan.ts'
import { noteReads, planSteps, settled } from './planner.ts'
import type { SchemaInfo } from './schema.ts'
import { stageSeconds } from '../stages.ts'
import { BatchState, type Row } from './state.ts'
import { eventsTotal, opsTotal, stepsFor, type Prepared } from './steps.ts'

type Db = Kysely<DatabaseSchema>

const log = childLogger('writer')
const passes = histogram(
  'openplane_indexer_plan_passes',
  'Planning passes per batch range (1 + bulk loads of what the previous pass missed)',
  [],
  [1, 2, 3, 4, 6, 8, 12, 16],
)
const stepRuns = counter(
  'openplane_indexer_plan_steps_total',
  'Planning steps (one per record op, handle or account change) and their runs over all passes',
  ['count'],
)
const statements = counter(
  'openplane_indexer_statements_total',
  'Statements the writer sent, by purpose',
  ['purpose'],
)

/**
 * What an attempt hands on: its row changes and its metrics and logs once committed; the events
 * it applied, to publish in its transaction.
 */
export interface Outcome {
  changes: Change[]
  pending: (() => void)[]
  applied: Applied[]
  /** What its committed parts did to the kept rows (committed-rows.ts), in order. */
  committed: CommittedPart[]
}

const NOTIFICATIONS_PER_INSERT = 1000
/** A notification row's columns; its id is the table's own. */
const NOTIFICATION_COLUMNS = [
  'did',
  'author',
  'recordUri',
  'recordCid',
  'reason',
  'reasonSubject',
  'sortAt',
] as const

export class BatchRun {
  private savepoints = 0
  private readonly tx: Db
  private readonly schema: SchemaInfo
  private readonly batch: IngestEvent[]
  private readonly prepared: Prepared
  private readonly kept: CommittedRows | undefined

  constructor(
    tx: Db,
    schema: SchemaInfo,
    batch: IngestEvent[],
    prepared: Prepared,
    kept?: CommittedRows,
  ) {
    this.tx = tx
    this.schema = schema
    this.batch = batch
    this.prepared = prepared
    this.kept = kept
  }

  /** Applies the whole batch, adding what committed parts hand on to `out`. */
  async all(isolate: boolean, out: Outcome): Promise<void> {
    let from = 0
    for (let i = 0; i <= this.batch.length; i++) {
      if (i < this.batch.length && !this.prepared.deletions.has(i)) continue
      await this.guarded(from, i, isolate, out, () => this.range(from, i))
      if (i < this.batch.length) await this.guarded(i, i + 1, isolate, out, () => this.deletion(i))
      from = i + 1
    }
  }

  /**
   * Applies [from, to) with `apply`; when isolating, behind a savepoint, halving a refused range
   * down to single events, which are skipped.
   */
  private async guarded(
    from: number,
    to: number,
    isolate: boolean,
    out: Outcome,
    apply: () => Promise<Outcome>,
  ): Promise<void> {
    if (from >= to) return
    if (!isolate) return mergeOutcome(out, await apply())
    const name = sql.raw(`range_${++this.savepoints}`)
    await sql`savepoint ${name}`.execute(this.tx)
    try {
      const got = await apply()
      await sql`release savepoint ${name}`.execute(this.tx)
      mergeOutcome(out, got)
    } catch (err) {
      await sql`rollback to savepoint ${name}`.execute(this.tx)
      if (to - from === 1) {
        const evt = this.batch[from]!
        out.pending.push(() => eventsTotal.inc({ type: evt.type, outcome: 'error' }))
        for (const op of evt.type === 'commit' ? evt.ops : []) {
          const collection = pluginFor(op.collection) ? op.collection : 'other'
          out.pending.push(() => opsTotal.inc({ collection, action: op.action, outcome: 'error' }))
        }
        log.error({ err, seq: evt.seq, did: evt.did, type: evt.type }, 'event skipped')
        return
      }
      // A deletion is a range of one: only plain ranges get here.
      const mid = from + Math.floor((to - from) / 2)
      await this.guarded(from, mid, true, out, () => this.range(from, mid))
      await this.guarded(mid, to, true, out, () => this.range(mid, to))
    }
  }

  /** Plans events [from, to) (no deletions among them) and applies the plan. */
  private async range(from: number, to: number): Promise<Outcome> {
    const planned = await planRange(
      this.tx,
      this.schema,
      this.batch,
      from,
      to,
      this.prepared,
      undefined,
      this.kept,
    )
    return applyPlanned(this.tx, this.schema, planned)
  }

  /** A confirmed account deletion or a purge: its whole index goes, with what it counted. */
  private async deletion(index: number): Promise<Outcome> {
    const evt = this.batch[index]!
    const deleted = await deleteAccount(this.tx, evt.did)
    // The ranges after it in this transaction must not read the account's rows as kept.
    this.kept?.forgetAccount(evt.did)
    const counters = new CounterBuffer()
    counters.add(deleted.counters)
    await counters.flush(this.tx)
    const feedItems = evt.type === 'purge' ? await purgeLeftovers(this.tx, evt.did) : []
    return {
      changes: [
        ...deleted.follows.map((row): Change => ({ table: 'follow', op: 'delete', row })),
        ...deleted.listItems.map((row): Change => ({ table: 'list_item', op: 'delete', row })),
        ...feedItems.map((row): Change => ({ table: 'feed_item', op: 'delete', row })),
      ],
      pending: [() => eventsTotal.inc({ type: evt.type, outcome: 'applied' })],
      applied: evt.type === 'account' ? [{ kind: 'account', evt, deleted: true }] : [],
      committed: [{ account: evt.did }],
    }
  }
}

/** A range's finished plan: its state (net writes), notifications, counters and last commits. */
export interface Planned {
  state: BatchState
  plan: Plan
  notifications: { drop: string[]; add: NotificationRow[] }
}

/**
 * Plans events [from, to) of the batch (no account deletion among them), reading through `db`:
 * the batch's transaction, or, planned ahead of it, any connection, with `below` the state of
 * the batch to be applied before it; and through `kept`, the rows committed batches left.
 */
export async function planRange(
  db: Db,
  schema: SchemaInfo,
  batch: IngestEvent[],
  from: number,
  to: number,
  prepared: Prepared,
  below?: BatchState,
  kept?: CommittedRows,
): Promise<Planned> {
  const started = performance.now()
  const absent = absentBefore(batch, from, to, prepared.absent)
  const state = new BatchState(db, schema, below, absent, kept)
  const plan = new Plan(state)
  const steps = stepsFor(batch, from, to, prepared)
  // What the steps are known to read is loaded first, in one round: they then run once.
  await noteReads(plan, steps)
  if (state.pending) await state.load()
  const planned = await planSteps(plan, steps)
  passes.observe(planned.passes)
  stepRuns.inc({ count: 'steps' }, steps.length)
  stepRuns.inc({ count: 'runs' }, planned.runs)
  const notifications = await settled(plan, () => plan.notificationsToWrite())
  stageSeconds.inc({ stage: 'load' }, state.loadSeconds)
  stageSeconds.inc({ stage: 'plan' }, (performance.now() - started) / 1000 - state.loadSeconds)
  statements.inc({ purpose: 'read' }, state.queries)
  return { state, plan, notifications }
}

/** Writes a planned range in the transaction: each table once, counters, notifications. */
export async function applyPlanned(tx: Db, schema: SchemaInfo, planned: Planned): Promise<Outcome> {
  const started = performance.now()
  const { state, plan, notifications } = planned
  const writes = state.writes()
  const changes = changesOf(state)
  const committed = state.committedRows()
  const actors: PlannedPart['actors'] = []
  for (const [did, row] of state.changedRows('actor')) {
    const actor = row && { handle: row.handle as string | null, indexedAt: row.indexedAt as string }
    actors.push([did, actor])
  }
  state.detach()
  let sent = await applyWrites(tx, writes, schema)
  const counters = new CounterBuffer()
  counters.add(plan.counters)
  sent += await counters.flush(tx)
  sent += await writeNotifications(tx, notifications, schema.copy ?? false)
  const seen = new Map(plan.seen.map((s) => [s.did, { commit: s.commit, rev: s.rev }]))
  if (seen.size) sent++
  await setCommitsLastSeen(tx, seen)
  // As setCommitsLastSeen records them.
  const revs: PlannedPart['revs'] = [...seen].map(([did, s]) => [did, s.rev || null])
  statements.inc({ purpose: 'write' }, sent)
  stageSeconds.inc({ stage: 'apply' }, (performance.now() - started) / 1000)
  return {
    changes,
    pending: [...plan.later],
    applied: [...plan.applied],
    committed: [{ ...committed, actors, revs }],
  }
}

/** Adds what `got` hands on to `out`, after what `out` holds. */
export function mergeOutcome(out: Outcome, got: Outcome): void {
  out.changes.push(...got.changes)
  out.pending.push(...got.pending)
  out.applied.push(...got.applied)
  out.committed.push(...got.committed)
}

async function writeNotifications(
  tx: Db,
  { drop, add }: { drop: string[]; add: NotificationRow[] },
  copy: boolean,
): Promise<number> {
  let sent = 0
  if (drop.length) {
    // Found uri by uri through notification_record_idx (eachValue), deleted by ctid. As
    // `"recordUri" = any($1)`, a table without statistics yet (a new fork's) was a sequential
    // scan of every notification per batch: 10 ms a batch at 80,000 notifications, growing with
    // the table, where the probes take 1 ms. Without statistics, Postgres also counts on
    // hundreds of rows a probe and compiles the statement (JIT: 3.5 ms a batch measured, more
    // than the delete), so JIT is off for the rest of this transaction: none of the writer's
    // statements gains from it.
    const probe = sql`select ctid from notification where "recordUri" = u.v`
    await sql`set local jit = off`.execute(tx)
    await sql`delete from notification
      where ctid = any(array(select n.ctid from ${eachValue(drop, probe, 'n')}))`.execute(tx)
    sent += 2
  }
  if (copy && add.length) {
    await copyRows(tx, 'notification', NOTIFICATION_COLUMNS, add)
    return sent + 1
  }
  for (let i = 0; i < add.length; i += NOTIFICATIONS_PER_INSERT) {
    await tx
      .insertInto('notification')
      .values(add.slice(i, i + NOTIFICATIONS_PER_INSERT))
      .execute()
    sent++
  }
  return sent
}

/**
 * The changes other stores follow, in the order the batch made them, from the plan (never from
 * what statements reported): a row replaced is the old one removed, then the new one added.
 */
function changesOf(state: BatchState): Change[] {
  const out: Change[] = []
  for (const { table, before, after } of state.history(WATCHED)) {
    if (table === 'follow' || table === 'list_item') {
      if (before) out.push({ table, op: 'delete', row: before as never })
      if (after) out.push({ table, op: 'insert', row: after as never })
    } else {
      if (before) out.push({ table: 'feed_item', op: 'delete', row: feedItem(before) })
      if (after) out.push({ table: 'feed_item', op: 'insert', row: feedItem(after) })
    }
  }
  return out
}

const feedItem = (row: Row): FeedItemValues => row as unknown as FeedItemValues

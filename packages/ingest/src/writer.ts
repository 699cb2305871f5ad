// Applies a batch of firehose events in one transaction together with the source's cursor, so
// a restart resumes exactly after the last applied batch (exactly-once effects; positions.ts).
// Network lookups (handles, account hosting: prepare.ts) happen before the transaction opens, for
// the next batch while this one is written (planned ahead). Inside it the batch is planned,
// then applied: every read the plugins make is loaded in bulk (batch/state.ts), the plan yields
// each table's net row changes, and each table is written once (batch/apply.ts). An account
// deletion is a barrier: what comes before it is applied, then the deletion, then the rest.
// A record that fails to plan is skipped (counted and logged); if the database refuses the
// applied batch, it is redone in halves behind savepoints until the events at fault stand alone
// and are skipped, never taking their neighbours down with them. A COMMIT whose reply is lost is
// settled by asking Postgres (settle.ts), so a batch's changes reach the listeners exactly once
// whether or not it committed. Graph and timeline changes come from the plan's net writes, never
// from whether a statement happened to add rows, so a retried batch can neither drop nor double
// one.
// Batches of every source (live streams, the backfill) are written one at a time, and live events
// of a repo being backfilled are set aside until its backfill is written (repo-gate.ts). In a
// community deployment, live events of accounts outside it are skipped (scope.ts).
import type { Kysely } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'
import { childLogger, counter, histogram } from '@openplane/telemetry'
import { applyPlanned, BatchRun, planRange, type Outcome, type Planned } from './batch/run.ts'
import { loadSchemaInfo, type SchemaInfo } from './batch/schema.ts'
import type { Prepared } from './batch/steps.ts'
import type { Change } from './changes.ts'
import type { IngestEvent } from './events.ts'
import type { WriterDeps } from './deps.ts'
import { dropHeld, dropHeldUpTo, loadHeld, unreadableHeld } from './held-store.ts'
import { cursorPosition, markedPosition, type Position } from './positions.ts'
import { prepareBatch } from './prepare.ts'
import { committed as settled } from './settle.ts'
import { RepoGate, type HoldLimits } from './repo-gate.ts'
import { scoped, type Scope } from './scope.ts'

type Db = Kysely<DatabaseSchema>

const log = childLogger('writer')
const batchSeconds = histogram(
  'openplane_indexer_batch_seconds',
  'Time per batch: network lookups before the transaction, then the transaction',
  ['phase'],
  [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
)
const plannedAhead = counter(
  'openplane_indexer_planned_ahead_total',
  'Batches prepared and planned while the previous one was written, by whether the plan was used',
  ['outcome'],
)
const batchEvents = histogram(
  'openplane_indexer_batch_events',
  'Events per batch',
  [],
  [1, 10, 50, 100, 250, 500, 1000, 5000],
)

export type CommitListener = (
  changes: Change[],
  committed: { source: string; cursor: number },
) => void

/**
 * A backfilled repo's last chunk: the rev its records are written at. Without a rev the repo
 * could not be fetched: every live event held for it is written as it came.
 */
export interface RepoFinish {
  rev?: string
}

/** A repo's events to write in a backfill; `finish` on its last chunk. */
export interface RepoChunk {
  did: string
  events: IngestEvent[]
  finish?: RepoFinish
}

/** Committed changes of backfill batches reach listeners under this source. */
export const BACKFILL_SOURCE = 'backfill'

/** An attempt whose COMMIT was sent but not answered: it may or may not have committed. */
interface Unsettled extends Outcome {
  /** Its transaction id, for txid_status(). */
  xid: string
  /** Seqs of its batch, in order. */
  seqs: number[]
  cursor: number
}

/** A batch's work done before its transaction. */
interface Early {
  prepared: Prepared
  /** Its plan, unless an account deletion splits it (then it is planned in the transaction). */
  planned: Planned | undefined
}

/** The next batch's early work, started while the current one is written. */
interface Ahead {
  seqs: number[]
  /** False once the batch below it did not commit as planned, or another source wrote. */
  valid: boolean
  /** The gate's and scope's versions it was planned under: a change since re-plans it. */
  versions: string
  work: Promise<Early | undefined>
}

const sameSeqs = (seqs: number[], batch: IngestEvent[]) =>
  seqs.length === batch.length && seqs.every((seq, i) => batch[i]!.seq === seq)

/** Held events a restart applies per transaction. */
const RECOVER_BATCH = 500

export class Writer {
  private readonly db: Db
  private readonly deps: WriterDeps
  private listeners: CommitListener[] = []
  private resyncListeners: ((dids: string[]) => void)[] = []
  /** Per source, the attempt whose commit is still to be settled (settle.ts). */
  private readonly unsettled = new Map<string, Unsettled>()
  /** The tables' keys, json and generated columns, read once. */
  private schema: Promise<SchemaInfo> | undefined
  /** Per source, the next batch being prepared and planned while the current one is written. */
  private readonly ahead = new Map<string, Ahead>()
  /** Live events of repos being backfilled (see repo-gate.ts). */
  readonly gate: RepoGate
  /**
   * The batch being written, whatever its source: batches are planned on what is committed, so
   * they are written one at a time (a live source's and a backfill's alike).
   */
  private tail: Promise<unknown> = Promise.resolve()
  /** The accounts indexed, when not the whole network. */
  private readonly scope: Scope | undefined
  /** Seqs of the skips that stand in for empty batches: negative, never a source's. */
  private filler = 0

  constructor(db: Db, deps: WriterDeps, opts: { scope?: Scope; hold?: HoldLimits } = {}) {
    this.db = db
    this.deps = deps
    this.scope = opts.scope
    this.gate = new RepoGate(opts.hold)
  }

  /**
   * Called after each batch commits, with its watched row changes (follows, feed items; maybe
   * none) and the firehose position it committed.
   */
  onCommitted(listener: CommitListener): void {
    this.listeners.push(listener)
  }

  /**
   * Called after a live batch commits with the repos its events showed out of sync with the index
   * (a broken `since` chain, a #sync to another rev; chain.ts): they should be fetched again.
   */
  onOutOfSync(listener: (dids: string[]) => void): void {
    this.resyncListeners.push(listener)
  }

  /**
   * Writes the batch, then hands its changes to the listeners. Throws when it could not be
   * written, or when Postgres cannot say whether an unanswered COMMIT went through; the caller
   * retries with the same batch, and a part of it found committed then is not written again.
   *
   * `next`, when given, is the batch the caller will apply after this one, exactly: it is
   * prepared and planned while this one is written (on this one's planned changes), and used
   * if this one commits as planned.
   */
  applyBatch(
    source: string,
    batch: IngestEvent[],
    opts: { next?: IngestEvent[] } = {},
  ): Promise<void> {
    return this.exclusive(() => {
      const inScope = scoped(this.scope, batch)
      const events = this.gate.divert(inScope)
      // Set aside, they are kept with the cursor that moves past them.
      const held = this.gate.heldIn(inScope)
      const cursor = events[events.length - 1]?.seq ?? 0
      // The stream time the cursor moves to: the last event with a repo (skips carry ours).
      const time = batch.findLast((e) => e.did !== '')?.time
      const position = cursorPosition(source, cursor, held, time)
      return this.write(source, events, cursor, position, opts.next)
    })
  }

  /**
   * Writes chunks of repos' backfills (events made from their CARs), several repos to one
   * transaction, with `mark` (their state) last in it. A repo's last chunk (`finish`) also writes
   * the live events held for it that are newer than the fetched rev (all of them, when it could
   * not be fetched); such repos are released once it commits. `mark` runs even when there is
   * nothing else to write. Retried like applyBatch (one caller: the backfill writes in turn).
   */
  applyRepos(
    parts: RepoChunk[],
    mark: (tx: Kysely<DatabaseSchema>) => Promise<void>,
  ): Promise<void> {
    return this.exclusive(async () => {
      // A finishing repo whose held posts refer to a repo still held keeps them held, waiting
      // for that one (repo-gate.ts): written now, they would be judged without what they refer to.
      const finishing = new Set(parts.flatMap((p) => (p.finish ? [p.did] : [])))
      const deferred = new Map<string, string>()
      for (const did of finishing) {
        const holder = this.gate.waitsOn(did, finishing)
        if (holder !== undefined) deferred.set(did, holder)
      }
      const letGo = (p: RepoChunk) => p.finish !== undefined && !deferred.has(p.did)
      const batch = parts.flatMap((p) =>
        letGo(p) ? [...p.events, ...this.gate.newer(p.did, p.finish!.rev)] : p.events,
      )
      const stored = parts
        .filter((p) => letGo(p) && this.gate.hasHeld(p.did))
        .flatMap((p) => this.gate.family(p.did))
      const position = markedPosition(async (tx) => {
        await dropHeld(tx, stored)
        await mark(tx)
      })
      await this.write(BACKFILL_SOURCE, this.orFiller(batch), 0, position)
      for (const p of parts) {
        if (!p.finish) continue
        const holder = deferred.get(p.did)
        if (holder !== undefined) this.gate.defer(p.did, holder, p.finish.rev)
        else this.gate.release(p.did, p.finish.rev)
      }
    })
  }

  /**
   * Applies, in the order they were held, the live events a crash left held (openplane_held_event):
   * their repos' fetches did not finish, so they are written as live events and the repos are
   * fetched again to reconcile. Call before any source starts. Returns how many were applied.
   */
  async recoverHeld(): Promise<number> {
    let after = 0
    let applied = 0
    for (;;) {
      const rows = await loadHeld(this.db, after, RECOVER_BATCH)
      if (!rows.length) return applied
      const last = rows[rows.length - 1]!.id
      const events = rows.flatMap((r) => (r.event ? [r.event] : []))
      if (events.length < rows.length) {
        unreadableHeld.inc(rows.length - events.length)
        log.error({ rows: rows.length - events.length }, 'held events unreadable; left out')
      }
      await this.exclusive(() =>
        this.write(
          BACKFILL_SOURCE,
          this.orFiller(events),
          0,
          markedPosition((tx) => dropHeldUpTo(tx, last)),
        ),
      )
      applied += events.length
      after = last
    }
  }

  /** The batch, or a skip when it is empty (so that its position is still written). */
  private orFiller(batch: IngestEvent[]): IngestEvent[] {
    if (batch.length) return batch
    return [{ type: 'skip', seq: -++this.filler, time: new Date().toISOString(), did: '' }]
  }

  /**
   * Removes these accounts' whole index (records, counts they made, notifications), as a confirmed
   * account deletion does, with `mark` written in the same transaction. For accounts that left the
   * deployment's scope; their changes reach listeners like a backfill's.
   */
  purge(dids: string[], mark: (tx: Kysely<DatabaseSchema>) => Promise<void>): Promise<void> {
    return this.exclusive(async () => {
      const time = new Date().toISOString()
      const events = dids.map((did): IngestEvent => ({ type: 'purge', seq: 0, time, did }))
      await this.write(BACKFILL_SOURCE, events, 0, markedPosition(mark))
    })
  }

  /**
   * Runs a read between batch writes: after every batch started before it has committed or
   * failed, before any started after. A repo held before the call (repo-gate.ts) then reads as
   * no live batch will change it until it is released.
   */
  between<T>(read: () => Promise<T>): Promise<T> {
    return this.exclusive(read)
  }

  /** Runs `fn` after every batch write started before it. */
  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    // The scope first takes in what the batches before changed in it (a new member, say).
    const gated = async () => {
      await this.scope?.settled()
      return fn()
    }
    const run = this.tail.then(gated, gated)
    this.tail = run.catch(() => {})
    return run
  }

  private async write(
    source: string,
    batch: IngestEvent[],
    cursor: number,
    position: Position,
    nextBatch?: IngestEvent[],
  ): Promise<void> {
    if (!batch.length) return
    const ahead = this.ahead.get(source)
    this.ahead.delete(source)
    const held = this.unsettled.get(source)
    if (held) {
      const committed = await settled(this.db, held.xid)
      this.unsettled.delete(source)
      if (committed) {
        log.info({ source, cursor: held.cursor }, 'an unanswered batch commit had gone through')
        this.deliver(source, held.cursor, held)
        const retried = held.seqs.every((seq, i) => batch[i]?.seq === seq)
        if (retried) batch = batch.slice(held.seqs.length)
        if (!batch.length) return
      }
    }
    batchEvents.observe(batch.length)
    this.schema ??= loadSchemaInfo(this.db).catch((err: unknown) => {
      this.schema = undefined
      throw err
    })
    const schema = await this.schema
    const usable =
      ahead && ahead.valid && ahead.versions === this.versions() && sameSeqs(ahead.seqs, batch)
    let early = usable ? await ahead.work : undefined
    if (ahead) plannedAhead.inc({ outcome: early ? 'used' : 'discarded' })
    if (!early) {
      const endPrepare = batchSeconds.startTimer({ phase: 'prepare' })
      early = await this.early(schema, batch)
      endPrepare()
    }
    const { prepared, planned } = early
    // The next batch is prepared and planned on this one's plan while this one is written.
    // (Held events are set aside again when that batch is written; a change of the gate meanwhile
    // discards this plan.)
    const next =
      nextBatch?.length && planned
        ? this.startAhead(
            schema,
            this.gate.divert(scoped(this.scope, nextBatch, true), true),
            early,
          )
        : undefined
    if (next) this.ahead.set(source, next)
    let outcome = await this.attempt(source, batch, prepared, schema, cursor, position, planned)
    if ('err' in outcome) {
      // This batch will not commit as planned: what was planned on it must not be used.
      if (next) next.valid = false
      // The database refused something in the batch: redo it, isolating the events at fault.
      const { err } = outcome
      log.warn({ err, source, from: batch[0]!.seq, to: cursor }, 'batch failed, isolating events')
      outcome = await this.attempt(
        source,
        batch,
        prepared,
        schema,
        cursor,
        position,
        undefined,
        true,
      )
      if ('err' in outcome) throw outcome.err
    }
    this.deliver(source, cursor, outcome)
    log.debug({ events: batch.length, cursor }, 'batch applied')
  }

  /**
   * The work on a batch that needs no transaction: network lookups, and, unless an account
   * deletion splits it, the whole plan (read through the pool; `below` is the batch to be
   * written before it, if not committed yet).
   */
  private async early(schema: SchemaInfo, batch: IngestEvent[], below?: Early): Promise<Early> {
    const prepared = await prepareBatch(this.db, this.deps, batch, below?.prepared)
    const planned = prepared.deletions.size
      ? undefined
      : await planRange(this.db, schema, batch, 0, batch.length, prepared, below?.planned?.state)
    return { prepared, planned }
  }

  private startAhead(schema: SchemaInfo, batch: IngestEvent[], below: Early): Ahead {
    const ahead: Ahead = {
      seqs: batch.map((e) => e.seq),
      valid: true,
      versions: this.versions(),
      work: undefined as never,
    }
    ahead.work = this.early(schema, batch, below).catch((err: unknown) => {
      // Planned again in its turn, when the error will show if it persists.
      log.debug({ err }, 'planning ahead failed')
      ahead.valid = false
      return undefined
    })
    return ahead
  }

  /** What a batch planned ahead was scoped and diverted by. */
  private versions(): string {
    return `${this.gate.version}/${this.scope?.version ?? 0}`
  }

  /**
   * One transaction over the batch: its outcome if it committed, or the error if it surely did
   * not. When the COMMIT itself failed, the connection may have died after Postgres committed,
   * so Postgres is asked; while it cannot tell, the attempt is kept for the next call and this
   * throws.
   */
  private async attempt(
    source: string,
    batch: IngestEvent[],
    prepared: Prepared,
    schema: SchemaInfo,
    cursor: number,
    position: Position,
    planned: Planned | undefined,
    isolate = false,
  ): Promise<Outcome | { err: unknown }> {
    const sent: { xid?: string } = {}
    // Repos found out of sync are reported only once the batch is known to have committed.
    const outOfSync = [...prepared.outOfSync]
    const report = () => {
      for (const listener of this.resyncListeners) listener(outOfSync)
    }
    const outcome: Outcome = { changes: [], pending: outOfSync.length ? [report] : [] }
    try {
      await this.db.transaction().execute(async (tx) => {
        if (planned && !isolate) {
          const got = await applyPlanned(tx, schema, planned)
          outcome.changes.push(...got.changes)
          outcome.pending.push(...got.pending)
        } else {
          await new BatchRun(tx, schema, batch, prepared).all(isolate, outcome)
        }
        // Last before COMMIT: the transaction id tells later whether an unanswered COMMIT went
        // through.
        sent.xid = await position(tx)
      })
      return outcome
    } catch (err) {
      // The xid comes from the last statement before COMMIT: without it, COMMIT was never sent.
      if (sent.xid === undefined) return { err }
      const xid = sent.xid
      log.warn({ err, source, xid }, 'batch commit unanswered; asking Postgres')
      const held: Unsettled = { ...outcome, xid, seqs: batch.map((e) => e.seq), cursor }
      this.unsettled.set(source, held)
      const committed = await settled(this.db, held.xid)
      this.unsettled.delete(source)
      if (!committed) return { err }
      log.info({ source, xid }, 'the unanswered batch commit had gone through')
      return outcome
    }
  }

  /** Emits a committed attempt's metrics and logs and hands its changes to the listeners. */
  private deliver(source: string, cursor: number, outcome: Outcome): void {
    // What another source planned ahead did not see this batch's rows.
    for (const [other, ahead] of this.ahead) if (other !== source) ahead.valid = false
    for (const emit of outcome.pending) emit()
    // Listeners follow live sources by cursor; the backfill has none.
    const committed = source === BACKFILL_SOURCE ? { source, cursor: 0 } : { source, cursor }
    for (const listener of this.listeners) {
      try {
        listener(outcome.changes, committed)
      } catch (err) {
        log.error({ err }, 'change listener failed')
      }
    }
  }
}

// Applies a batch of firehose events in one transaction together with the source's cursor, so
// a restart resumes exactly after the last applied batch (exactly-once effects; positions.ts).
// Network lookups (handles, account hosting: prepare.ts) happen before the transaction opens, for
// the next batch while this one is written (planned ahead: ahead.ts). Inside it the batch is
// planned, then applied: every read the plugins make is loaded in bulk (batch/state.ts), the plan
// yields each table's net row changes, and each table is written once (batch/apply.ts). An
// account deletion is a barrier: what comes before it is applied, then the deletion, then the
// rest. A record that fails to plan is skipped (counted and logged); if the database refuses the
// applied batch, it is redone in halves behind savepoints until the events at fault stand alone
// and are skipped, never taking their neighbours down with them. A COMMIT whose reply is lost is
// settled by asking Postgres (attempt.ts, settle.ts), so a batch's changes reach the listeners
// exactly once whether or not it committed. Graph and timeline changes come from the plan's net
// writes, never from whether a statement happened to add rows, so a retried batch can neither
// drop nor double one.
// Batches of every source (live streams, the backfill) are written one at a time, and live events
// of a repo being backfilled are set aside until its backfill is written (repo-gate.ts). In a
// community deployment, live events of accounts outside it are skipped (scope.ts). With publishing
// on, what each batch applied is appended, in its transaction, to the published-event log that
// `/subscribe` serves (publish.ts).
import type { Kysely } from 'kysely'
import type { DatabaseSchema, TransactionThread } from '@openplane/db'
import { childLogger, flushTallies, histogram } from '@openplane/telemetry'
import { earlyWork, PlanAhead } from './ahead.ts'
import { Attempts } from './attempt.ts'
import { CommittedRows, KEPT_ROWS } from './batch/committed-rows.ts'
import { CommittedRepos, KEPT_REPOS } from './committed-repos.ts'
import type { Outcome } from './batch/run.ts'
import { loadSchemaInfo, type SchemaInfo } from './batch/schema.ts'
import type { Change } from './changes.ts'
import type { IngestEvent } from './events.ts'
import type { WriterDeps } from './deps.ts'
import { dropHeld, dropHeldUpTo, loadHeld, unreadableHeld } from './held-store.ts'
import { cursorPosition, markedPosition, type Position } from './positions.ts'
import { Publisher } from './publish.ts'
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

/** Held events a restart applies per transaction. */
const RECOVER_BATCH = 500

export class Writer {
  private readonly db: Db
  private readonly deps: WriterDeps
  private listeners: CommitListener[] = []
  private resyncListeners: ((dids: string[]) => void)[] = []
  /** Transactions, and per source the one whose COMMIT is still to be settled (attempt.ts). */
  private readonly attempts: Attempts
  /** The tables' keys, json and generated columns, read once. */
  private schema: Promise<SchemaInfo> | undefined
  /** Per source, the next batch prepared and planned while the current one is written. */
  private readonly planAhead: PlanAhead
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
  /** Rows committed batches left, read through while planning (batch/committed-rows.ts). */
  private readonly kept: CommittedRows
  /** Actors and revs committed batches left, read through while preparing (committed-repos.ts). */
  private readonly repos: CommittedRepos

  constructor(
    db: Db,
    deps: WriterDeps,
    opts: {
      scope?: Scope
      hold?: HoldLimits
      publish?: boolean
      /** Where batches planned ahead are written (attempt.ts); without it, on this thread. */
      transactions?: TransactionThread | undefined
      /** Keys whose committed rows are kept between batches (0: none; batch/committed-rows.ts). */
      keptRows?: number
      /** Repos whose actor and rev are kept between batches (0: none; committed-repos.ts). */
      keptRepos?: number
    } = {},
  ) {
    this.db = db
    this.deps = deps
    this.kept = new CommittedRows(opts.keptRows ?? KEPT_ROWS)
    this.repos = new CommittedRepos(opts.keptRepos ?? KEPT_REPOS)
    const publisher = opts.publish ? new Publisher() : undefined
    this.attempts = new Attempts(db, publisher, opts.transactions, this.kept)
    this.planAhead = new PlanAhead(db, deps, { rows: this.kept, repos: this.repos })
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
      // Set aside again as the gate stands once this batch is planned.
      const next = opts.next
      const following = next && (() => this.gate.divert(scoped(this.scope, next, true), true))
      return this.write(source, events, cursor, position, following)
    })
  }

  /**
   * Writes chunks of repos' backfills (events made from their CARs), several repos to one
   * transaction, with `mark` (their state) last in it. A repo's last chunk (`finish`) also writes
   * the live events held for it that are newer than the fetched rev (all of them, when it could
   * not be fetched); such repos are released once it commits. `mark` runs even when there is
   * nothing else to write. Retried like applyBatch (one caller: the backfill writes in turn).
   * `next`: asked once these are planned, the chunks the caller will write next, planned while
   * these are written.
   */
  applyRepos(
    parts: RepoChunk[],
    mark: (tx: Kysely<DatabaseSchema>) => Promise<void>,
    next?: () => RepoChunk[],
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
      // The live events held for these repos are published; what the fetches made is not.
      const fetched = new Set(parts.flatMap((p) => p.events))
      // Planned ahead unless a next repo finishing would bring held live events along: those are
      // known only when it is written (and a plan for other events is discarded then anyway).
      // Fetched events are neither scoped nor held: they are what a held repo waits for.
      const following =
        next &&
        (() => {
          const chunks = next()
          return chunks.every((p) => !p.finish || !this.gate.hasHeld(p.did))
            ? chunks.flatMap((p) => p.events)
            : []
        })
      await this.write(BACKFILL_SOURCE, this.orFiller(batch), 0, position, following, fetched)
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
    /** The next batch, asked once this one is planned; planned while this one is written. */
    nextBatch?: () => IngestEvent[],
    fetched?: ReadonlySet<IngestEvent>,
  ): Promise<void> {
    if (!batch.length) return
    const left = await this.attempts.settleLeft(source)
    if (left) {
      this.deliver(source, left.cursor, left)
      const retried = left.seqs.every((seq, i) => batch[i]?.seq === seq)
      if (retried) batch = batch.slice(left.seqs.length)
      if (!batch.length) return
    }
    batchEvents.observe(batch.length)
    this.schema ??= loadSchemaInfo(this.db).catch((err: unknown) => {
      this.schema = undefined
      throw err
    })
    const schema = await this.schema
    let early = await this.planAhead.take(source, batch, this.versions(source))
    if (!early) {
      const endPrepare = batchSeconds.startTimer({ phase: 'prepare' })
      early = await earlyWork(this.db, this.deps, schema, batch, {
        rows: this.kept,
        repos: this.repos,
      })
      endPrepare()
    }
    const { prepared, planned } = early
    // The next batch is prepared and planned on this one's plan while this one is written.
    // (Held events are set aside again when that batch is written; a change of the gate meanwhile
    // discards this plan.)
    const following = planned && nextBatch?.()
    const next = following?.length
      ? this.planAhead.start(source, schema, following, early, this.versions(source))
      : undefined
    const attempt = {
      source,
      batch,
      prepared,
      schema,
      cursor,
      position,
      planned,
      fetched,
      onOutOfSync: (dids: string[]) => {
        for (const listener of this.resyncListeners) listener(dids)
      },
    }
    let outcome = await this.attempts.run(attempt)
    if ('err' in outcome) {
      // This batch will not commit as planned: what was planned on it must not be used.
      if (next) next.valid = false
      // The database refused something in the batch: redo it, isolating the events at fault,
      // and reading every row the batch touches: a create taken for new (absent-creates.ts) may
      // have met a row its repo's chain said could not be there.
      const { err } = outcome
      log.warn({ err, source, from: batch[0]!.seq, to: cursor }, 'batch failed, isolating events')
      outcome = await this.attempts.run({
        ...attempt,
        prepared: { ...prepared, absent: new Set() },
        planned: undefined,
        isolate: true,
      })
      if ('err' in outcome) throw outcome.err
    }
    this.deliver(source, cursor, outcome)
    log.debug({ events: batch.length, cursor }, 'batch applied')
  }

  /**
   * What a batch planned ahead was scoped and diverted by. Nothing, for the backfill's: its plan
   * stands whatever repos are held meanwhile (the batch's events, compared at its turn, still
   * catch held events joining a finishing repo).
   */
  private versions(source: string): string {
    if (source === BACKFILL_SOURCE) return BACKFILL_SOURCE
    return `${this.gate.version}/${this.scope?.version ?? 0}`
  }

  /** Emits a committed attempt's metrics and logs and hands its changes to the listeners. */
  private deliver(source: string, cursor: number, outcome: Outcome): void {
    this.planAhead.wrote(source)
    this.kept.apply(outcome.committed)
    this.repos.apply(outcome.committed)
    for (const emit of outcome.pending) emit()
    flushTallies()
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

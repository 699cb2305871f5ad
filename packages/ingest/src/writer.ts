// Applies a batch of firehose events in one transaction together with the source's cursor, so
// a restart resumes exactly after the last applied batch (exactly-once effects). Network lookups
// (handles, account hosting) happen before the transaction opens. A failing event is isolated
// with savepoints and skipped (counted and logged), never taking its neighbours down with it.
// A COMMIT whose reply is lost is settled by asking Postgres, so a batch's changes reach the
// listeners exactly once whether or not it committed.
import { sql, type Kysely } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'
import { InvalidRecordError, pluginFor, parseRecord, type RecordRef } from '@openplane/plugins'
import { childLogger, counter, histogram } from '@openplane/telemetry'
import {
  AccountStatusError,
  deleteAccount,
  needsHandleReindex,
  setCommitsLastSeen,
  setHandle,
  setUpstreamStatus,
} from './actors.ts'
import { ChangeLog, type Change } from './changes.ts'
import { CounterBuffer, NotificationBuffer } from './effects.ts'
import type { IngestEvent } from './events.ts'
import {
  createRecord,
  createRecords,
  deleteRecord,
  updateRecord,
  type CreateItem,
  type RecordContext,
} from './records.ts'

type Db = Kysely<DatabaseSchema>

const log = childLogger('writer')
const ops = counter('openplane_indexer_ops_total', 'Record operations by collection and outcome', [
  'collection',
  'action',
  'outcome',
])
const events = counter('openplane_indexer_events_total', 'Firehose events by type and outcome', [
  'type',
  'outcome',
])

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

export interface WriterDeps {
  /** Verified handle for a DID (null if it does not verify), or undefined if unresolvable now. */
  resolveHandle(did: string, force: boolean): Promise<string | null | undefined>
  /** Whether the account's PDS still hosts the repo (false = really deleted). */
  isHosted(did: string): Promise<boolean>
}

export type CommitListener = (
  changes: Change[],
  committed: { source: string; cursor: number },
) => void

/** What an attempt that committed hands on: its row changes, and its metrics and logs. */
interface Outcome {
  changes: Change[]
  pending: (() => void)[]
}

/** An attempt whose COMMIT was sent but not answered: it may or may not have committed. */
interface Unsettled extends Outcome {
  /** Its transaction id, for txid_status(). */
  xid: string
  /** Seqs of its batch, in order. */
  seqs: number[]
  cursor: number
}

/** How long to wait for a transaction that is still open to end before giving up for now. */
const SETTLE_TRIES = 20
const SETTLE_WAIT_MS = 100

interface Prepared {
  /** Handle to write at this event index: did → value. */
  handles: Map<number, { did: string; handle: string | null }>
  deletions: Set<number>
}

export class Writer {
  private readonly db: Db
  private readonly deps: WriterDeps
  /**
   * Metrics and logs of the batch attempt in progress: emitted only once it commits, so a batch
   * redone with savepoints is not counted twice.
   */
  private pending: (() => void)[] = []
  private changes = new ChangeLog()
  private listeners: CommitListener[] = []
  /** Per source, the attempt whose commit is still to be settled (see settle()). */
  private readonly unsettled = new Map<string, Unsettled>()

  /**
   * Called after each batch commits, with its watched row changes (follows, feed items; maybe
   * none) and the firehose position it committed.
   */
  onCommitted(listener: CommitListener): void {
    this.listeners.push(listener)
  }

  private later(fn: () => void): void {
    this.pending.push(fn)
  }

  /** Creates of `independent` plugins waiting to be written in bulk, in firehose order. */
  private bulkRun: CreateItem[] = []

  private async flushRun(ctx: RecordContext): Promise<void> {
    const items = this.bulkRun
    this.bulkRun = []
    await createRecords(ctx, items)
  }

  constructor(db: Db, deps: WriterDeps) {
    this.db = db
    this.deps = deps
  }

  /**
   * Writes the batch, then hands its changes to the listeners. Throws when it could not be
   * written, or when Postgres cannot say whether an unanswered COMMIT went through; the caller
   * retries with the same batch, and a part of it found committed then is not written again.
   */
  async applyBatch(source: string, batch: IngestEvent[]): Promise<void> {
    if (!batch.length) return
    const held = this.unsettled.get(source)
    if (held) {
      const committed = await this.settle(held)
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
    const endPrepare = batchSeconds.startTimer({ phase: 'prepare' })
    const prepared = await this.prepare(batch)
    const prepareSecs = endPrepare()
    const endWrite = batchSeconds.startTimer({ phase: 'write' })
    const cursor = batch[batch.length - 1]!.seq
    let outcome = await this.attempt(source, batch, prepared, cursor, false)
    if ('err' in outcome) {
      // Something in the batch failed: redo it with each event behind a savepoint.
      const { err } = outcome
      log.warn({ err, source, from: batch[0]!.seq, to: cursor }, 'batch failed, isolating events')
      outcome = await this.attempt(source, batch, prepared, cursor, true)
      if ('err' in outcome) throw outcome.err
    }
    const writeSecs = endWrite()
    this.deliver(source, cursor, outcome)
    log.debug({ events: batch.length, cursor, prepareSecs, writeSecs }, 'batch applied')
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
    cursor: number,
    isolate: boolean,
  ): Promise<Outcome | { err: unknown }> {
    const sent: { xid?: string } = {}
    let failure: { err: unknown } | undefined
    try {
      await this.db
        .transaction()
        .execute((tx) => this.run(tx, source, batch, prepared, cursor, isolate, sent))
    } catch (err) {
      failure = { err }
    }
    const outcome: Outcome = { changes: this.changes.take(), pending: this.pending }
    this.pending = []
    if (!failure) return outcome
    // The xid comes from the last statement before COMMIT: without it, COMMIT was never sent.
    if (sent.xid === undefined) return failure
    const xid = sent.xid
    log.warn({ err: failure.err, source, xid }, 'batch commit unanswered; asking Postgres')
    const held: Unsettled = { ...outcome, xid, seqs: batch.map((e) => e.seq), cursor }
    this.unsettled.set(source, held)
    const committed = await this.settle(held)
    this.unsettled.delete(source)
    if (!committed) return failure
    log.info({ source, xid }, 'the unanswered batch commit had gone through')
    return outcome
  }

  /**
   * Whether the held attempt's transaction committed, asked on another connection. Throws while
   * Postgres cannot say (unreachable, or the transaction still open after a while): never guess.
   */
  private async settle(held: Unsettled): Promise<boolean> {
    for (let tries = 1; ; tries++) {
      const { rows } = await sql<{ status: string | null }>`
        select txid_status(${held.xid}::bigint) as status`.execute(this.db)
      const status = rows[0]?.status ?? null
      if (status === 'committed') return true
      if (status === 'aborted') return false
      // In progress: the server has not noticed the lost connection yet, or is still committing.
      if (status !== 'in progress' || tries >= SETTLE_TRIES) {
        throw new Error(
          `outcome of batch transaction ${held.xid} unknown: ${status ?? 'no status'}`,
        )
      }
      await new Promise((resolve) => setTimeout(resolve, SETTLE_WAIT_MS))
    }
  }

  /** Emits a committed attempt's metrics and logs and hands its changes to the listeners. */
  private deliver(source: string, cursor: number, outcome: Outcome): void {
    for (const emit of outcome.pending) emit()
    for (const listener of this.listeners) {
      try {
        listener(outcome.changes, { source, cursor })
      } catch (err) {
        log.error({ err }, 'change listener failed')
      }
    }
  }

  private async run(
    tx: Db,
    source: string,
    batch: IngestEvent[],
    prepared: Prepared,
    cursor: number,
    isolate: boolean,
    /** Receives the transaction id once the last statement before COMMIT has run. */
    sent: { xid?: string },
  ): Promise<void> {
    this.pending = []
    this.bulkRun = []
    this.changes = new ChangeLog()
    const counters = new CounterBuffer()
    const notifications = new NotificationBuffer()
    const ctx: RecordContext = { db: tx, counters, notifications, changes: this.changes }
    const seen = new Map<string, { commit: string; rev: string }>()
    for (const [i, evt] of batch.entries()) {
      if (!isolate) {
        await this.applyEvent(ctx, evt, i, prepared, false, seen)
        continue
      }
      await sql`savepoint evt`.execute(tx)
      const restore = snapshot(ctx, this.pending, seen)
      try {
        await this.applyEvent(ctx, evt, i, prepared, true, seen)
        await sql`release savepoint evt`.execute(tx)
      } catch (err) {
        await sql`rollback to savepoint evt`.execute(tx)
        restore()
        this.later(() => events.inc({ type: evt.type, outcome: 'error' }))
        log.error({ err, seq: evt.seq, did: evt.did, type: evt.type }, 'event skipped')
      }
    }
    await this.flushRun(ctx)
    await counters.flush(tx)
    await notifications.flush(tx)
    await setCommitsLastSeen(tx, seen)
    // Last before COMMIT: the transaction id tells later whether an unanswered COMMIT went through.
    const row = await tx
      .insertInto('openplane_cursor')
      .values({ source, seq: cursor })
      .onConflict((oc) => oc.column('source').doUpdateSet({ seq: cursor, updatedAt: sql`now()` }))
      .returning(sql<string>`txid_current()::text`.as('xid'))
      .executeTakeFirstOrThrow()
    sent.xid = row.xid
  }

  private async applyEvent(
    ctx: RecordContext,
    evt: IngestEvent,
    index: number,
    prepared: Prepared,
    isolate: boolean,
    seen: Map<string, { commit: string; rev: string }>,
  ): Promise<void> {
    const tx = ctx.db
    const handle = prepared.handles.get(index)
    if (handle) await setHandle(tx, handle.did, handle.handle, evt.time)
    switch (evt.type) {
      case 'skip':
        return
      case 'commit':
        // The stock handles ops, not commits: a commit without ops leaves no trace.
        if (!evt.ops.length) return
        for (const op of evt.ops) await this.applyOp(ctx, evt, op, isolate)
        // The latest commit per repo is written once per batch.
        seen.set(evt.did, { commit: evt.commit, rev: evt.rev })
        break
      case 'sync':
        seen.set(evt.did, { commit: evt.commit, rev: evt.rev })
        break
      case 'identity':
        break
      case 'account':
        await this.flushRun(ctx)
        if (!evt.active && evt.status === 'deleted') {
          if (prepared.deletions.has(index)) {
            const deleted = await deleteAccount(tx, evt.did)
            for (const row of deleted.follows) {
              ctx.changes.add({ table: 'follow', op: 'delete', row })
            }
            ctx.counters.add(deleted.counters)
            // Notifications of this batch not written yet go the way of the stored ones.
            ctx.notifications.dropInvolving(evt.did)
          }
        } else {
          try {
            await setUpstreamStatus(tx, evt.did, evt.active, evt.status)
          } catch (err) {
            if (!(err instanceof AccountStatusError)) throw err
            this.later(() => events.inc({ type: 'account', outcome: 'invalid' }))
            const message = err.message
            this.later(() => log.warn({ did: evt.did, status: evt.status }, message))
            return
          }
        }
        break
    }
    this.later(() => events.inc({ type: evt.type, outcome: 'applied' }))
  }

  private async applyOp(
    ctx: RecordContext,
    evt: Extract<IngestEvent, { type: 'commit' }>,
    op: Extract<IngestEvent, { type: 'commit' }>['ops'][number],
    isolate: boolean,
  ): Promise<void> {
    const uri = `at://${evt.did}/${op.collection}/${op.rkey}`
    const plugin = pluginFor(op.collection)
    if (!plugin) {
      this.later(() => ops.inc({ collection: 'other', action: op.action, outcome: 'ignored' }))
      return
    }
    const label = { collection: op.collection, action: op.action }
    if (op.action === 'delete') {
      await this.flushRun(ctx)
      await deleteRecord(ctx, plugin, uri, parseRecord)
      this.later(() => ops.inc({ ...label, outcome: 'applied' }))
      return
    }
    const ref: RecordRef = {
      uri,
      did: evt.did,
      collection: op.collection,
      rkey: op.rkey,
      cid: op.cid ?? '',
      indexedAt: evt.time,
    }
    let rec: unknown
    try {
      rec = plugin.parse(op.record)
      // Before anything is written: a record the stock drops outright costs its batch nothing.
      plugin.check?.(ref, rec)
    } catch (err) {
      if (!(err instanceof InvalidRecordError)) throw err
      this.later(() => ops.inc({ ...label, outcome: 'invalid' }))
      const reason = err.message
      this.later(() => log.warn({ uri, reason }, 'invalid record skipped'))
      return
    }
    const write = op.action === 'create' ? createRecord : updateRecord
    const independent =
      typeof plugin.independent === 'function' ? plugin.independent(rec) : plugin.independent
    const bulk = !isolate && op.action === 'create' && !!independent
    if (!bulk) await this.flushRun(ctx)
    if (bulk) {
      this.bulkRun.push({ plugin, ref, rec })
    } else if (!isolate) {
      await write(ctx, plugin, ref, rec)
    } else {
      // Inside isolation each op gets its own savepoint so one bad record spares its commit.
      await sql`savepoint op`.execute(ctx.db)
      const restore = snapshot(ctx, this.pending)
      try {
        await write(ctx, plugin, ref, rec)
        await sql`release savepoint op`.execute(ctx.db)
      } catch (err) {
        await sql`rollback to savepoint op`.execute(ctx.db)
        restore()
        this.later(() => ops.inc({ ...label, outcome: 'error' }))
        log.error({ err, uri }, 'record skipped')
        return
      }
    }
    this.later(() => ops.inc({ ...label, outcome: 'applied' }))
  }

  /** Network work for the batch, done before the transaction: handles and account deletions. */
  private async prepare(batch: IngestEvent[]): Promise<Prepared> {
    const relevant = (e: IngestEvent) =>
      e.type !== 'skip' && !(e.type === 'commit' && e.ops.length === 0)
    const dids = [...new Set(batch.filter(relevant).map((e) => e.did))]
    const actors = new Map(
      (dids.length === 0
        ? []
        : await this.db
            .selectFrom('actor')
            .select(['did', 'handle', 'indexedAt'])
            .where('did', 'in', dids)
            .execute()
      ).map((a) => [a.did, a]),
    )
    // An account event says "deleted"; it is applied only if the PDS no longer has the repo.
    const deletions = new Set<number>()
    await Promise.all(
      [...batch.entries()].map(async ([index, evt]) => {
        if (evt.type !== 'account' || evt.active || evt.status !== 'deleted') return
        if (!(await this.deps.isHosted(evt.did).catch(() => true))) deletions.add(index)
      }),
    )
    // Which events re-check a handle depends on the outcome of earlier checks (an invalid handle
    // is re-checked hourly, a valid one daily), so plan in rounds: each round resolves, all at
    // once, the first unresolved check of each actor, until the plan needs no more.
    const outcomes = new Map<number, string | null | undefined>()
    const handles = new Map<number, { did: string; handle: string | null }>()
    for (;;) {
      handles.clear()
      const plan = new ActorPlan(actors)
      const blocked = new Set<string>()
      const wanted: { index: number; did: string; force: boolean }[] = []
      for (const [index, evt] of batch.entries()) {
        if (deletions.has(index)) plan.remove(evt.did)
        if (!relevant(evt) || evt.type === 'account' || blocked.has(evt.did)) continue
        if (evt.type !== 'identity' && !needsHandleReindex(plan.get(evt.did), evt.time)) continue
        if (!outcomes.has(index)) {
          wanted.push({ index, did: evt.did, force: evt.type === 'identity' })
          blocked.add(evt.did)
          continue
        }
        const handle = outcomes.get(index)
        // An unresolvable actor is left as it is, as the stock's failed lookup leaves it.
        if (handle === undefined) continue
        handles.set(index, { did: evt.did, handle })
        plan.set(evt.did, { handle, indexedAt: evt.time })
      }
      if (!wanted.length) break
      await Promise.all(
        wanted.map(async ({ index, did, force }) => {
          outcomes.set(index, await this.deps.resolveHandle(did, force).catch(() => undefined))
        }),
      )
    }
    return { handles, deletions }
  }
}

type ActorState = { handle: string | null; indexedAt: string }

/**
 * Actor rows as the batch will have changed them, for planning handle checks: what setHandle and
 * deleteAccount will do, without writing. A verified handle moves to its new holder.
 */
class ActorPlan {
  private readonly state: Map<string, ActorState | null>
  private readonly holder = new Map<string, string>()

  constructor(actors: Map<string, ActorState>) {
    this.state = new Map(actors)
    for (const [did, a] of actors) if (a.handle !== null) this.holder.set(a.handle, did)
  }

  get(did: string): ActorState | undefined {
    return this.state.get(did) ?? undefined
  }

  set(did: string, next: ActorState): void {
    this.release(did)
    const previous = next.handle === null ? undefined : this.holder.get(next.handle)
    if (previous !== undefined && previous !== did) {
      this.state.set(previous, { ...this.state.get(previous)!, handle: null })
    }
    if (next.handle !== null) this.holder.set(next.handle, did)
    this.state.set(did, next)
  }

  remove(did: string): void {
    this.release(did)
    this.state.set(did, null)
  }

  private release(did: string): void {
    const handle = this.state.get(did)?.handle
    if (handle && this.holder.get(handle) === did) this.holder.delete(handle)
  }
}

/** Captures the in-memory batch buffers so a savepoint rollback can drop their share too. */
function snapshot(
  ctx: RecordContext,
  pending: unknown[],
  seen?: Map<string, { commit: string; rev: string }>,
) {
  const pendingLength = pending.length
  const changes = ctx.changes.snapshot()
  const counters = ctx.counters.snapshot()
  const notifications = ctx.notifications.snapshot()
  const seenCopy = seen ? new Map(seen) : undefined
  return () => {
    pending.length = pendingLength
    changes()
    counters()
    notifications()
    if (seen && seenCopy) {
      seen.clear()
      for (const [k, v] of seenCopy) seen.set(k, v)
    }
  }
}

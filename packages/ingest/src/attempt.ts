// One transaction over a batch, ended by its position (positions.ts): its outcome if it
// committed, or the error if it surely did not. When the COMMIT itself failed, the connection
// may have died after Postgres committed, so Postgres is asked (settle.ts); while it cannot tell,
// the attempt is kept, per source, and settled before that source writes anything again — never
// guessed.
//
// A batch planned ahead is written on a transaction thread when there is one: its statements are
// made first, on a recorder, then run there together (transaction-thread.ts in @openplane/db).
// Refused batches, and batches planned inside their transaction, run here.
import type { Kysely } from 'kysely'
import {
  recordingDb,
  TransactionFailed,
  type DatabaseSchema,
  type TransactionThread,
} from '@openplane/db'
import { childLogger } from '@openplane/telemetry'
import type { CommittedRows } from './batch/committed-rows.ts'
import { applyPlanned, BatchRun, mergeOutcome, type Outcome, type Planned } from './batch/run.ts'
import type { SchemaInfo } from './batch/schema.ts'
import type { Prepared } from './batch/steps.ts'
import type { IngestEvent } from './events.ts'
import type { Position } from './positions.ts'
import type { Publisher } from './publish.ts'
import { committed as settled } from './settle.ts'
import { stageSeconds } from './stages.ts'

const log = childLogger('writer')

/** An attempt whose COMMIT was sent but not answered: it may or may not have committed. */
export interface Unsettled extends Outcome {
  /** Its transaction id, for txid_status(). */
  xid: string
  /** Seqs of its batch, in order. */
  seqs: number[]
  cursor: number
}

/** What one attempt writes. */
export interface AttemptOf {
  source: string
  batch: IngestEvent[]
  prepared: Prepared
  schema: SchemaInfo
  cursor: number
  position: Position
  /** The batch's plan, made before the transaction; absent: planned inside it. */
  planned: Planned | undefined
  /** Redo the batch with each range behind a savepoint, isolating the events Postgres refuses. */
  isolate?: boolean
  /** Called with the repos the batch showed out of sync, once it is known to have committed. */
  onOutOfSync: (dids: string[]) => void
  /** Events of the batch made from fetched repos (a backfill's): not published. */
  fetched?: ReadonlySet<IngestEvent>
}

export class Attempts {
  private readonly db: Kysely<DatabaseSchema>
  /** Per source, the attempt whose commit is still to be settled. */
  private readonly unsettled = new Map<string, Unsettled>()
  /** Appends what each batch applied to the published-event log, when publishing is on. */
  private readonly publisher: Publisher | undefined
  private readonly thread: TransactionThread | undefined
  /** Rows committed batches left, read through by batches planned inside their transaction. */
  private readonly kept: CommittedRows | undefined

  constructor(
    db: Kysely<DatabaseSchema>,
    publisher?: Publisher,
    thread?: TransactionThread,
    kept?: CommittedRows,
  ) {
    this.db = db
    this.publisher = publisher
    this.thread = thread
    this.kept = kept
  }

  /**
   * The source's attempt left unsettled, if any, once Postgres says it committed (undefined if it
   * did not, or none was left). Throws while Postgres cannot say.
   */
  async settleLeft(source: string): Promise<Unsettled | undefined> {
    const held = this.unsettled.get(source)
    if (!held) return undefined
    const committed = await settled(this.db, held.xid)
    this.unsettled.delete(source)
    if (!committed) return undefined
    log.info({ source, cursor: held.cursor }, 'an unanswered batch commit had gone through')
    return held
  }

  /** One transaction over the batch (see the top of this file). */
  async run(a: AttemptOf): Promise<Outcome | { err: unknown }> {
    const sent: { xid?: string } = {}
    // Repos found out of sync are reported only once the batch is known to have committed.
    const outOfSync = [...a.prepared.outOfSync]
    const report = () => a.onOutOfSync(outOfSync)
    const outcome: Outcome = {
      changes: [],
      pending: outOfSync.length ? [report] : [],
      applied: [],
      committed: [],
    }
    if (this.thread && a.planned && !a.isolate) return this.onThread(a, this.thread, outcome)
    try {
      await this.db.transaction().execute(async (tx) => {
        // Last before COMMIT: the transaction id tells later whether an unanswered COMMIT went
        // through.
        sent.xid = await this.write(tx, a, outcome)
      })
      return outcome
    } catch (err) {
      // The xid comes from the last statement before COMMIT: without it, COMMIT was never sent.
      if (sent.xid === undefined) return { err }
      return this.unanswered(a, outcome, sent.xid, err)
    }
  }

  /**
   * The batch's statements on `tx` (its transaction, or a recorder): its rows, its published
   * messages, its position last. Adds what the batch hands on to `outcome`; returns what the
   * position returns, the transaction id.
   */
  private async write(tx: Kysely<DatabaseSchema>, a: AttemptOf, outcome: Outcome): Promise<string> {
    if (a.planned && !a.isolate) {
      mergeOutcome(outcome, await applyPlanned(tx, a.schema, a.planned))
    } else {
      const run = new BatchRun(tx, a.schema, a.batch, a.prepared, this.kept)
      await run.all(a.isolate ?? false, outcome)
    }
    const counted = await this.publisher?.write(tx, outcome.applied, {
      ...(a.fetched && { fetched: a.fetched }),
      copy: a.schema.copy ?? false,
    })
    if (counted) outcome.pending.push(counted)
    return a.position(tx)
  }

  /** The planned batch's statements, made on a recorder, run on the transaction thread. */
  private async onThread(
    a: AttemptOf,
    thread: TransactionThread,
    outcome: Outcome,
  ): Promise<Outcome | { err: unknown }> {
    const recorder = recordingDb()
    try {
      // Its one read, made here: the recorder answers none.
      await this.publisher?.ready(this.db)
      // The position's statement, last, answers the transaction id on the thread.
      await this.write(recorder.db, a, outcome)
    } catch (err) {
      return { err }
    }
    const started = performance.now()
    try {
      await thread.run(recorder.take())
      return outcome
    } catch (err) {
      if (!(err instanceof TransactionFailed) || !err.commitSent) return { err }
      const xid = err.last?.[0]?.['xid']
      // Every position's last statement answers it (positions.ts).
      if (typeof xid !== 'string') throw new Error('a batch commit went unanswered without its xid')
      return this.unanswered(a, outcome, xid, err)
    } finally {
      stageSeconds.inc({ stage: 'apply' }, (performance.now() - started) / 1000)
    }
  }

  /** The attempt's COMMIT went unanswered: Postgres says whether it went through. */
  private async unanswered(
    a: AttemptOf,
    outcome: Outcome,
    xid: string,
    err: unknown,
  ): Promise<Outcome | { err: unknown }> {
    log.warn({ err, source: a.source, xid }, 'batch commit unanswered; asking Postgres')
    const seqs = a.batch.map((e) => e.seq)
    this.unsettled.set(a.source, { ...outcome, xid, seqs, cursor: a.cursor })
    const committed = await settled(this.db, xid)
    this.unsettled.delete(a.source)
    if (!committed) return { err }
    log.info({ source: a.source, xid }, 'the unanswered batch commit had gone through')
    return outcome
  }
}

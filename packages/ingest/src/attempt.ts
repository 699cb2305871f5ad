// One transaction over a batch, ended by its position (positions.ts): its outcome if it
// committed, or the error if it surely did not. When the COMMIT itself failed, the connection
// may have died after Postgres committed, so Postgres is asked (settle.ts); while it cannot tell,
// the attempt is kept, per source, and settled before that source writes anything again — never
// guessed.
import type { Kysely } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'
import { childLogger } from '@openplane/telemetry'
import { applyPlanned, BatchRun, type Outcome, type Planned } from './batch/run.ts'
import type { SchemaInfo } from './batch/schema.ts'
import type { Prepared } from './batch/steps.ts'
import type { IngestEvent } from './events.ts'
import type { Position } from './positions.ts'
import type { Publisher } from './publish.ts'
import { committed as settled } from './settle.ts'

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

  constructor(db: Kysely<DatabaseSchema>, publisher?: Publisher) {
    this.db = db
    this.publisher = publisher
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
    }
    try {
      await this.db.transaction().execute(async (tx) => {
        if (a.planned && !a.isolate) {
          const got = await applyPlanned(tx, a.schema, a.planned)
          outcome.changes.push(...got.changes)
          outcome.pending.push(...got.pending)
          outcome.applied.push(...got.applied)
        } else {
          await new BatchRun(tx, a.schema, a.batch, a.prepared).all(a.isolate ?? false, outcome)
        }
        const counted = await this.publisher?.write(tx, outcome.applied, {
          ...(a.fetched && { fetched: a.fetched }),
          copy: a.schema.copy ?? false,
        })
        if (counted) outcome.pending.push(counted)
        // Last before COMMIT: the transaction id tells later whether an unanswered COMMIT went
        // through.
        sent.xid = await a.position(tx)
      })
      return outcome
    } catch (err) {
      // The xid comes from the last statement before COMMIT: without it, COMMIT was never sent.
      if (sent.xid === undefined) return { err }
      const xid = sent.xid
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
}

// Planning ahead: while a source's batch is written, its next batch is prepared (network lookups,
// prepare.ts) and planned on the current one's planned changes (batch/state.ts reads the batch
// below's changes above whatever it loads). That plan is used only for exactly the batch it was
// made for, if the batch below committed as planned, no other source wrote in between, and the
// gate and scope are as they were (`versions`); otherwise the batch is planned again in its turn.
import type { Kysely } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'
import { childLogger, counter } from '@openplane/telemetry'
import type { CommittedRows } from './batch/committed-rows.ts'
import type { CommittedRepos } from './committed-repos.ts'
import { planRange, type Planned } from './batch/run.ts'
import type { SchemaInfo } from './batch/schema.ts'
import type { Prepared } from './batch/steps.ts'
import type { WriterDeps } from './deps.ts'
import type { IngestEvent } from './events.ts'
import { prepareBatch } from './prepare.ts'

const log = childLogger('writer')
const plannedAhead = counter(
  'openplane_indexer_planned_ahead_total',
  'Batches prepared and planned while the previous one was written, by whether the plan was used',
  ['outcome'],
)

/** A batch's work done before its transaction. */
export interface Early {
  prepared: Prepared
  /** Its plan, unless an account deletion splits it (then it is planned in the transaction). */
  planned: Planned | undefined
}

/** The next batch's early work, started while the current one is written. */
export interface Ahead {
  seqs: number[]
  /** False once the batch below it did not commit as planned, or another source wrote. */
  valid: boolean
  /** The gate's and scope's versions it was planned under: a change since re-plans it. */
  versions: string
  work: Promise<Early | undefined>
}

const sameSeqs = (seqs: number[], batch: IngestEvent[]) =>
  seqs.length === batch.length && seqs.every((seq, i) => batch[i]!.seq === seq)

/**
 * The work on a batch that needs no transaction: network lookups, and, unless an account
 * deletion splits it, the whole plan (read through the pool and `kept`, the rows committed
 * batches left; `below` is the batch to be written before it, if not committed yet).
 */
export async function earlyWork(
  db: Kysely<DatabaseSchema>,
  deps: WriterDeps,
  schema: SchemaInfo,
  batch: IngestEvent[],
  kept: { rows?: CommittedRows; repos?: CommittedRepos },
  below?: Early,
): Promise<Early> {
  const prepared = await prepareBatch(db, deps, batch, below?.prepared, kept.repos)
  const state = below?.planned?.state
  const planned = prepared.deletions.size
    ? undefined
    : await planRange(db, schema, batch, 0, batch.length, prepared, state, kept.rows)
  return { prepared, planned }
}

/** Per source, the next batch being prepared and planned while the current one is written. */
export class PlanAhead {
  private readonly db: Kysely<DatabaseSchema>
  private readonly deps: WriterDeps
  private readonly kept: { rows?: CommittedRows; repos?: CommittedRepos }
  private readonly ahead = new Map<string, Ahead>()

  constructor(
    db: Kysely<DatabaseSchema>,
    deps: WriterDeps,
    kept: { rows?: CommittedRows; repos?: CommittedRepos } = {},
  ) {
    this.db = db
    this.deps = deps
    this.kept = kept
  }

  /** The plan made ahead for exactly this batch, if it still holds (the source's is used up). */
  async take(source: string, batch: IngestEvent[], versions: string): Promise<Early | undefined> {
    const ahead = this.ahead.get(source)
    if (!ahead) return undefined
    this.ahead.delete(source)
    const usable = ahead.valid && ahead.versions === versions && sameSeqs(ahead.seqs, batch)
    const early = usable ? await ahead.work : undefined
    plannedAhead.inc({ outcome: early ? 'used' : 'discarded' })
    return early
  }

  /** Starts the source's next batch's early work on `below`, the batch being written. */
  start(
    source: string,
    schema: SchemaInfo,
    batch: IngestEvent[],
    below: Early,
    versions: string,
  ): Ahead {
    const ahead: Ahead = {
      seqs: batch.map((e) => e.seq),
      valid: true,
      versions,
      work: undefined as never,
    }
    ahead.work = earlyWork(this.db, this.deps, schema, batch, this.kept, below).catch(
      (err: unknown) => {
        // Planned again in its turn, when the error will show if it persists.
        log.debug({ err }, 'planning ahead failed')
        ahead.valid = false
        return undefined
      },
    )
    this.ahead.set(source, ahead)
    return ahead
  }

  /** `source` committed a batch: what the others planned ahead did not see its rows. */
  wrote(source: string): void {
    for (const [other, ahead] of this.ahead) if (other !== source) ahead.valid = false
  }
}

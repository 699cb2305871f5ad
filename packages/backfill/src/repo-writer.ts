// A fetched repo's records written through the committer a few events at a time, in thread
// order: a reply whose parent or root another repo in flight will bring waits for it
// (thread-order.ts). The last write marks the repo done in its transaction; a repo whose last
// records still wait is parked, and done when whoever writes them writes its last one.
import type { Kysely } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'
import type { IngestEvent } from '@openplane/ingest'
import { childLogger } from '@openplane/telemetry'
import type { RepoCar } from './car.ts'
import type { Committer } from './committer.ts'
import { RepoFailed } from './failures.ts'
import { indexedRecords, repoEvents, type IndexedRepo, type RepoDiffCounts } from './reconcile.ts'
import { uriOf, type ThreadOrder, type Woken } from './thread-order.ts'

const log = childLogger('backfill')

type Commit = Extract<IngestEvent, { type: 'commit' }>

/** A repo whose CAR is written but for records waiting for their context (thread-order.ts). */
interface Parked {
  host: string
  rev: string
  records: number
}

export interface RepoWriterOptions {
  db: Kysely<DatabaseSchema>
  committer: Committer
  order: ThreadOrder
  /** Record ops per written event. */
  opsPerEvent: number
  /** Events of one repo handed to the committer at a time. */
  eventsPerWrite: number
}

/** What becomes of a parked repo once its waiting records are written, or fail to be. */
export interface ParkedOutcomes {
  /** Its last waiting record is written: the repo is done. */
  done(did: string): void
  /** A waiting record could not be written: the repo failed. */
  failed(did: string, err: unknown): Promise<void>
}

export class RepoWriter {
  private readonly opts: RepoWriterOptions
  private readonly outcomes: ParkedOutcomes
  private readonly parked = new Map<string, Parked>()
  /** Repos still being written whose woken records could not be written. */
  private readonly broken = new Set<string>()
  /** Repos found fresh (IndexedRepo.fresh) while their CAR is written: whether a write went. */
  private readonly fresh = new Map<string, { written: boolean }>()
  private seq = 0

  constructor(opts: RepoWriterOptions, outcomes: ParkedOutcomes) {
    this.opts = opts
    this.outcomes = outcomes
  }

  /** The repo's events, a few at a time; the last write marks the repo done. */
  async write(
    did: string,
    host: string,
    car: RepoCar,
    signal: AbortSignal,
    read: IndexedRepo | undefined,
  ): Promise<{ counts: RepoDiffCounts; parked: boolean }> {
    const indexed = read ?? (await indexedRecords(this.opts.db, did))
    if (!indexed.fresh) return this.writeEvents(did, host, car, signal, indexed)
    this.fresh.set(did, { written: false })
    try {
      return await this.writeEvents(did, host, car, signal, indexed)
    } finally {
      this.fresh.delete(did)
    }
  }

  /**
   * Writes records that stopped waiting; a parked repo left with none is done. Each repo's are
   * handed to the committer at once, so they share transactions: written one after another, the
   * replies to a busy thread (or all those left at the end of a run) took one transaction each.
   */
  async wake(woken: Map<string, Woken>): Promise<void> {
    await Promise.all([...woken].map(([did, records]) => this.wakeOne(did, records)))
  }

  private async writeEvents(
    did: string,
    host: string,
    car: RepoCar,
    signal: AbortSignal,
    indexed: IndexedRepo,
  ): Promise<{ counts: RepoDiffCounts; parked: boolean }> {
    const order = this.opts.order
    const counts: RepoDiffCounts = {
      records: 0,
      created: 0,
      updated: 0,
      deleted: 0,
      unchanged: 0,
      bad: 0,
    }
    const src = {
      seq: () => ++this.seq,
      time: new Date().toISOString(),
      opsPerEvent: this.opts.opsPerEvent,
    }
    const onBad = (key: string, reason: string) =>
      log.warn({ did, key, reason }, 'record left out of the backfill')
    let pending: Commit[] = []
    for await (const evt of repoEvents(car, indexed, src, counts, onBad)) {
      pending.push(evt)
      if (pending.length < this.opts.eventsPerWrite) continue
      signal.throwIfAborted()
      await this.writeReady(did, await order.split(did, pending))
      pending = []
    }
    signal.throwIfAborted()
    let ready = await order.split(did, pending)
    const done = { host, rev: car.rev, records: counts.records }
    if (order.waiting(did)) {
      await this.writeReady(did, ready)
      ready = []
    }
    if (this.broken.delete(did)) throw new RepoFailed('a waiting record could not be written', host)
    // Marked done when its last waiting record is written (see wake()); what it waited for may
    // have come meanwhile.
    const parked = order.waiting(did)
    if (parked) this.parked.set(did, done)
    else await this.writeReady(did, ready, done)
    await this.wake(order.sealed(did))
    return { counts, parked }
  }

  /**
   * Writes a repo's events; with `done`, the last write, which marks it done (an empty one too).
   * Then writes what waited for these records.
   */
  private async writeReady(did: string, events: Commit[], done?: Parked): Promise<void> {
    if (!events.length && !done) return
    this.markFresh(did, events)
    const batch: IngestEvent[] = events.length
      ? events
      : [{ type: 'skip', seq: ++this.seq, time: new Date().toISOString(), did: '' }]
    const finish = done && { rev: done.rev }
    await this.opts.committer.write({ did, events: batch, finish }, done && { did, ...done })
    const uris = events.flatMap((e) => e.ops.map((op) => uriOf(did, op)))
    await this.wake(this.opts.order.written(uris))
  }

  /**
   * Marks a fresh repo's first write for the writer, which then knows that no row its records make
   * by their creator exists yet. Marked as it is handed to the committer, which writes in that
   * order.
   */
  private markFresh(did: string, events: Commit[]): void {
    const fresh = this.fresh.get(did)
    if (!fresh || fresh.written || !events.length) return
    for (const evt of events) evt.firstWrite = true
    fresh.written = true
  }

  private async wakeOne(did: string, { commit, rev, ops }: Woken): Promise<void> {
    const evt: Commit = {
      type: 'commit',
      seq: ++this.seq,
      time: new Date().toISOString(),
      did,
      commit,
      rev,
      ops,
    }
    const parked = this.parked.get(did)
    const last = parked && !this.opts.order.waiting(did) ? parked : undefined
    // Claimed before the write: another wake running meanwhile must not finish it too (two
    // "done" marks of one repo in one transaction, and the repo counted twice).
    if (last) this.parked.delete(did)
    try {
      await this.writeReady(did, [evt], last)
    } catch (err) {
      // The repo is not marked done: fetched again by a later run.
      if (!parked) {
        this.broken.add(did)
        return
      }
      this.parked.delete(did)
      await this.outcomes.failed(did, err)
      return
    }
    if (last) this.outcomes.done(did)
  }
}

// Each repo the worker takes, from its DID to its last write: the DID resolved to its PDS, the
// CAR fetched (a bounded number at once per host) and read, its records written (repo-writer.ts),
// while the writer holds the repo's live events. A fetch that fails is retried by its kind; one
// given up marks the repo failed, out of sync, with its held live events written as live events
// in that transaction, so none is lost.
import { getPds } from '@atproto/identity'
import type { Kysely } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'
import { signingKeyOf } from '@openplane/signatures'
import { childLogger } from '@openplane/telemetry'
import { RepoCarError } from './car.ts'
import type { BusyRepos } from './busy-repos.ts'
import type { CarReader } from './car-reader.ts'
import type { Committer } from './committer.ts'
import { HeldPastBound, messageOf, RepoFailed } from './failures.ts'
import { fetchRepo, RepoFetchError } from './fetch-repo.ts'
import type { HostLimits } from './hosts.ts'
import { bytesTotal, failuresTotal, inFlight, recordsTotal, reposTotal } from './metrics.ts'
import type { BackfillOptions, BackfillStats } from './options.ts'
import type { IndexedRecords, IndexedRepo } from './reconcile.ts'
import { RepoWriter } from './repo-writer.ts'
import { markFailed } from './repos.ts'
import type { ThreadOrder } from './thread-order.ts'

const log = childLogger('backfill')

/** What the jobs share with the worker that takes the repos. */
export interface JobsContext {
  opts: BackfillOptions
  /** Repos taken and not yet done or given up. */
  busy: BusyRepos
  stats: BackfillStats
  /** Whether the worker is stopping: nothing is retried then. */
  stopping(): boolean
  hosts: HostLimits
  cars: CarReader
  indexed: IndexedRecords
  order: ThreadOrder
  committer: Committer
}

export class RepoJobs {
  private readonly ctx: JobsContext
  private readonly opts: BackfillOptions
  /** Per repo in flight, what gives up its fetch (its held events passed a bound). */
  private readonly aborts = new Map<string, AbortController>()
  private readonly writer: RepoWriter

  constructor(ctx: JobsContext) {
    this.ctx = ctx
    this.opts = ctx.opts
    const { db, opsPerEvent, eventsPerWrite } = ctx.opts
    const { committer, order } = ctx
    this.writer = new RepoWriter(
      { db, committer, order, opsPerEvent, eventsPerWrite },
      {
        done: (did) => this.done(did),
        failed: async (did, err) => {
          await this.fail(did, err)
          ctx.busy.release(did)
        },
      },
    )
    this.opts.writer.gate.onOverflow((did) => {
      const abort = this.aborts.get(did)
      log.warn({ did, fetching: !!abort }, 'live events held for a repo passed the bound')
      abort?.abort(new HeldPastBound())
    })
  }

  /** Writes the records still waiting for context that no repo in flight will bring. */
  async wakeWaiting(): Promise<void> {
    await this.writer.wake(this.ctx.order.all())
  }

  /** Backfills one repo taken: fetched, written, retried, or marked failed. */
  async run(did: string): Promise<void> {
    const { stats } = this.ctx
    const gate = this.opts.writer.gate
    gate.hold(did)
    // Read now, with the repos taken alongside, while its fetch starts: held, the repo's index
    // cannot change before its first write (a retry reads it again, after what it wrote).
    const indexed = this.ctx.indexed.load(did)
    const abort = new AbortController()
    this.aborts.set(did, abort)
    stats.inFlight++
    inFlight.set(stats.inFlight)
    const started = Date.now()
    let written = false
    try {
      for (let attempt = 1; ; attempt++) {
        try {
          const outcome = await this.fetchAndWrite(
            did,
            abort.signal,
            attempt === 1 ? indexed : undefined,
          )
          written = true
          if (outcome === 'done') this.done(did)
          return
        } catch (caught) {
          // Its records waiting for context come again with the next fetch.
          this.ctx.order.drop(did)
          const err: unknown = abort.signal.aborted ? abort.signal.reason : caught
          const retryIn = abort.signal.aborted ? undefined : this.retryDelay(err, attempt)
          // A rate-limited host is waited for before the next fetch (HostLimits).
          const waits =
            err instanceof RepoFetchError && err.kind === 'rate-limited'
              ? Math.max(0, (err.retryAt ?? 0) - Date.now())
              : (retryIn ?? 0)
          const overdue = Date.now() - started + waits > this.opts.maxHoldMs
          if (retryIn !== undefined && !this.ctx.stopping() && !overdue) {
            log.debug({ did, attempt, err: messageOf(err), retryIn }, 'repo fetch failed; retrying')
            await new Promise((r) => setTimeout(r, retryIn))
            continue
          }
          await this.fail(did, err)
          return
        }
      }
    } finally {
      this.aborts.delete(did)
      if (!written) {
        // Not marked failed (it could not be, or the worker is stopping): the repo stays to be
        // fetched, and what was held for it is written now, or after a restart if stopping.
        if (gate.holding(did) && !this.ctx.stopping()) await this.letGo(did)
        this.ctx.busy.release(did)
      }
      stats.inFlight--
      inFlight.set(stats.inFlight)
    }
  }

  /** The repo is written whole. */
  private done(did: string): void {
    this.ctx.busy.release(did)
    this.ctx.stats.done++
    reposTotal.inc({ outcome: 'done' })
  }

  /**
   * Marks the repo failed (out of sync until fetched), its held live events written as the stock
   * would have written them, in the transaction that marks it.
   */
  private async fail(did: string, err: unknown): Promise<void> {
    const { stats, order } = this.ctx
    const host = err instanceof RepoFailed ? err.host : undefined
    const reason = messageOf(err)
    const kind =
      err instanceof RepoFetchError ? err.kind : err instanceof RepoCarError ? 'car' : 'other'
    if (kind === 'other') stats.errors++
    if (kind === 'other' || kind === 'car') failuresTotal.inc({ kind })
    stats.failed++
    reposTotal.inc({ outcome: 'failed' })
    const held = this.opts.writer.gate.newer(did).length
    log.warn({ did, host, reason, held }, 'repo backfill failed; out of sync until fetched')
    await this.letGo(did, (db) => markFailed(db, did, { reason, host }, this.opts.retry)).catch(
      (e: unknown) => {
        log.error({ err: e, did }, 'could not record a failed repo')
      },
    )
    // Its own waiting records go with it; replies waiting for its records will not get them.
    order.drop(did)
    await this.writer.wake(order.sealed(did, true))
  }

  /**
   * Stops holding the repo's live events, writing those held as live events (its fetch failed or
   * was given up), with `mark` in the same transaction. Tried until it is written: letting the
   * repo's later events through before these would apply them out of order. While the worker
   * stops it gives up instead; the events stay held in Postgres and a restart writes them.
   */
  private async letGo(
    did: string,
    mark: (tx: Kysely<DatabaseSchema>) => Promise<void> = async () => {},
  ): Promise<void> {
    const gate = this.opts.writer.gate
    if (!gate.hasHeld(did)) {
      gate.release(did)
      await mark(this.opts.db)
      return
    }
    for (let attempt = 1; ; attempt++) {
      try {
        await this.opts.writer.applyRepos([{ did, events: [], finish: {} }], mark)
        return
      } catch (err) {
        if (this.ctx.stopping()) {
          log.warn({ did, err: messageOf(err) }, 'held events left for the next start')
          return
        }
        const delay = Math.min(30_000, 500 * 2 ** attempt)
        log.warn({ did, err: messageOf(err), retryMs: delay }, 'held events not written; retrying')
        await new Promise((r) => setTimeout(r, delay))
      }
    }
  }

  /** How long to wait before fetching again, or undefined to give up now. */
  private retryDelay(err: unknown, attempt: number): number | undefined {
    if (!(err instanceof RepoFetchError)) return undefined
    this.ctx.stats.errors++
    failuresTotal.inc({ kind: err.kind })
    // A rate limit is the host's pacing, not the repo's fault: it does not use up attempts.
    if (err.kind === 'rate-limited') return 0
    if (err.kind !== 'transient' || attempt >= this.opts.maxAttempts) return undefined
    return Math.min(30_000, 500 * 2 ** attempt) * (0.5 + Math.random() / 2)
  }

  private async fetchAndWrite(
    did: string,
    signal: AbortSignal,
    indexed: Promise<IndexedRepo | undefined> | undefined,
  ): Promise<'done' | 'waiting'> {
    const { hosts, cars, stats } = this.ctx
    const { pds, signingKey } = await this.resolve(did)
    this.opts.prefetch?.see(did, new Date().toISOString())
    const host = new URL(pds).host
    const release = await hosts.acquire(host)
    let car
    try {
      signal.throwIfAborted()
      const body = await fetchRepo(pds, did, { ...this.opts, signal })
      if (this.opts.verify && !signingKey) throw new RepoFailed('DID document names no key', host)
      car = await cars.read(body, {
        did,
        signingKey: this.opts.verify ? signingKey : undefined,
      })
      hosts.ok(host)
    } catch (err) {
      if (err instanceof RepoFetchError && err.kind === 'rate-limited') {
        const until = hosts.rateLimited(host, err.retryAt)
        log.info({ host, until: new Date(until).toISOString() }, 'host rate-limited; pausing it')
      }
      if (err instanceof RepoCarError) throw new RepoFailed(err.message, host)
      throw err
    } finally {
      release()
    }
    try {
      stats.bytes += car.bytes
      bytesTotal.inc(car.bytes)
      const { counts, parked } = await this.writer.write(did, host, car, signal, await indexed)
      stats.records += counts.records
      for (const change of ['created', 'updated', 'deleted', 'unchanged', 'bad'] as const) {
        if (counts[change]) recordsTotal.inc({ change }, counts[change])
      }
      // A parked repo is counted done by whoever writes its last waiting record.
      return parked ? 'waiting' : 'done'
    } finally {
      await car.close()
    }
  }

  /** The repo's PDS and signing key. A handle is not needed (nor checked) to fetch a repo. */
  private async resolve(did: string): Promise<{ pds: string; signingKey: string | undefined }> {
    let doc
    try {
      doc = await this.opts.didDocs.ensureResolve(did)
    } catch (err) {
      throw new RepoFailed(`DID does not resolve: ${messageOf(err)}`, undefined)
    }
    const pds = getPds(doc)
    if (!pds) throw new RepoFailed('DID document names no PDS', undefined)
    // The key is read only to verify (decoding it costs a point decompression). In verifying
    // mode a document without a key fails the repo when its commit is checked.
    return { pds, signingKey: this.opts.verify ? signingKeyOf(doc) : undefined }
  }
}

// The backfill worker: takes repos from the state table, a bounded number in flight, and hands
// each to its job (repo-jobs.ts: resolve the DID to its PDS, fetch the repo's CAR, write its
// records through the same writer as the live stream, in chunks, the last chunk marking the repo
// done in its transaction). While a repo is in flight, the writer holds its live events and
// writes those newer than the fetched rev right after it (see @openplane/ingest's repo gate).
//
// Failures, by kind: a PDS that rate-limits is paused for as long as it says and the repo waits;
// timeouts, 5xx and cut bodies are retried with backoff up to `maxAttempts` fetches; a repo the
// PDS says is gone, a CAR that does not parse or verify, or a DID that does not resolve to a PDS
// is marked failed with the reason. A failed repo is out of sync: it is fetched again later, at
// a backoff that grows with each failure in a row (`retry`), and a fetch that succeeds
// reconciles it (the CAR wins). None of them stops the others. The live events held while a repo
// was fetched are never lost to a failure: they are written as live events, in order, in the
// transaction that marks the repo failed (and so when the repo's held events pass a bound).
//
// In a community deployment the worker fetches only repos of accounts in its scope, and removes
// the index of accounts queued for purging (they left the community) before fetching more. Repos
// the live stream shows out of sync (sync 1.1) are fetched again (followResyncs).
import { childLogger } from '@openplane/telemetry'
import { BusyRepos } from './busy-repos.ts'
import { CarReader } from './car-reader.ts'
import { Committer } from './committer.ts'
import { HostLimits } from './hosts.ts'
import { outOfSyncOldest, outOfSyncRepos, reposTotal } from './metrics.ts'
import type { BackfillOptions, BackfillStats } from './options.ts'
import { IndexedRecords } from './reconcile.ts'
import { RepoJobs } from './repo-jobs.ts'
import { markPurged, RepoTable, type RepoKey } from './repos.ts'
import { ThreadOrder } from './thread-order.ts'

const log = childLogger('backfill')

/** How often the out-of-sync gauges are read from the state table. */
const GAUGE_EVERY_MS = 15_000

export class Backfill {
  private readonly opts: BackfillOptions
  readonly repos: RepoTable
  /** Repos taken and not yet done or given up. */
  private readonly busy = new BusyRepos()
  private readonly order: ThreadOrder
  private readonly cars: CarReader
  private readonly jobs: RepoJobs
  private gaugesAt = 0
  private stopping = false
  readonly stats: BackfillStats = {
    startedAt: Date.now(),
    done: 0,
    failed: 0,
    records: 0,
    bytes: 0,
    errors: 0,
    purged: 0,
    inFlight: 0,
  }

  constructor(opts: BackfillOptions) {
    this.opts = opts
    this.repos = new RepoTable(opts.db)
    this.order = new ThreadOrder(opts.db)
    this.cars = new CarReader({ workers: opts.workers, memoryBytes: opts.memoryBytes })
    this.jobs = new RepoJobs({
      opts,
      busy: this.busy,
      stats: this.stats,
      stopping: () => this.stopping,
      hosts: new HostLimits(opts.perHost),
      cars: this.cars,
      indexed: new IndexedRecords(opts.db, opts.writer),
      order: this.order,
      committer: new Committer(opts.writer, opts.opsPerWrite),
    })
  }

  /**
   * Works until no repo is left to take (`drain`), or until stopped, looking for new work every
   * `pollMs` when idle (beside a live indexer: repos asked for by `openplane backfill`).
   */
  async run(opts: { drain: boolean; pollMs?: number }): Promise<BackfillStats> {
    const running = new Set<Promise<void>>()
    let retryFailed = this.opts.retryFailed
    let failures = 0
    while (!this.stopping) {
      // The queue lives in Postgres: while it is away, wait and try again (the repos being
      // fetched go on, each retried by its own policy) instead of ending the worker.
      try {
        await this.readGauges()
        if (await this.purgeSome()) continue
        const room = this.opts.concurrency - running.size
        const dids = room > 0 ? await this.take(room, retryFailed) : []
        for (const did of dids) {
          this.busy.add(did)
          const one: Promise<void> = this.jobs.run(did).finally(() => running.delete(one))
          running.add(one)
        }
        if (running.size === 0 && dids.length === 0) {
          // Records still waiting for context no repo will bring: written as they are.
          if (this.order.any()) {
            await this.jobs.wakeWaiting()
            continue
          }
          // Failed repos are retried once per run, after the pending ones.
          retryFailed = false
          if (opts.drain && !(await this.joinersQueued())) break
          await new Promise((r) => setTimeout(r, opts.pollMs ?? 2000))
          continue
        }
        if (running.size >= this.opts.concurrency || dids.length === 0) await Promise.race(running)
        failures = 0
      } catch (err) {
        if (this.stopping) break
        const delay = Math.min(30_000, 1000 * 2 ** failures++)
        log.warn(
          { err: (err as Error).message, retryMs: delay },
          'backfill queue unreadable; retrying',
        )
        await new Promise((r) => setTimeout(r, delay))
      }
    }
    await Promise.all(running)
    return this.stats
  }

  /**
   * Fetches again, whole, each repo the live stream shows out of sync with the index (a broken
   * `since` chain or a #sync to another rev: @openplane/ingest's chain.ts).
   */
  followResyncs(): void {
    this.opts.writer.onOutOfSync((dids) => {
      const scope = this.opts.scope
      const wanted = scope ? dids.filter((did) => scope.has(did)) : dids
      if (!wanted.length) return
      log.info(
        { repos: wanted.length, sample: wanted.slice(0, 5) },
        'repos out of sync; refetching',
      )
      reposTotal.inc({ outcome: 'resync' }, wanted.length)
      // A repo failing to fetch is out of sync already: it keeps its schedule.
      this.repos.enqueue(wanted, { refetch: true, keepBackoff: true }).catch((err: unknown) => {
        log.error({ err, repos: wanted.length }, 'could not ask for out-of-sync repos')
      })
    })
  }

  /** Removes the index of every account queued for purging; how many were purged. */
  async purgeQueued(): Promise<number> {
    const before = this.stats.purged
    while (!this.stopping && (await this.purgeSome()));
    return this.stats.purged - before
  }

  /** Whether accounts that just joined the community were queued, once it took them in. */
  private async joinersQueued(): Promise<boolean> {
    if (!this.opts.scope) return false
    await this.opts.scope.settled()
    const counts = await this.repos.counts()
    return counts.pending + counts.purge > 0
  }

  /** Where the scan of the state table for repos to fetch is (it wraps around at the end). */
  private cursor: RepoKey | undefined

  /**
   * Up to `room` repos to fetch that are not busy. Scans forward, so repos waiting for context
   * (busy, still pending) are passed once per round, not at every call; none: a round ended.
   */
  private async take(room: number, retryFailed: boolean): Promise<string[]> {
    const dids: string[] = []
    const outside: string[] = []
    try {
      for (;;) {
        const { found: page, busy } = await this.busy.whileReading(() =>
          this.repos.page(200, this.cursor, retryFailed),
        )
        for (const r of page) {
          this.cursor = r.key
          if (busy(r.did)) continue
          if (this.opts.scope && !this.opts.scope.has(r.did)) outside.push(r.did)
          else dids.push(r.did)
          if (dids.length >= room) return dids
        }
        if (page.length < 200) {
          this.cursor = undefined
          // Then failed repos whose time to be fetched again has come (in scope: one that left
          // the community is purged, not fetched).
          if (!retryFailed) {
            const due = await this.busy.whileReading((taken) =>
              this.repos.due(room - dids.length, taken),
            )
            for (const did of due.found) {
              if (due.busy(did)) continue
              if (!this.opts.scope || this.opts.scope.has(did)) dids.push(did)
            }
          }
          return dids
        }
      }
    } finally {
      if (outside.length) {
        reposTotal.inc({ outcome: 'out_of_scope' }, outside.length)
        log.info({ repos: outside.length }, 'repos outside the community not fetched')
        await this.repos.forget(outside)
      }
    }
  }

  /**
   * Removes the index of some accounts queued for purging, in one transaction; whether there were
   * any. One back in the community meanwhile is fetched again instead.
   */
  private async purgeSome(): Promise<boolean> {
    const queued = (await this.repos.toPurge(100)).filter((did) => !this.busy.has(did))
    if (!queued.length) return false
    const back = queued.filter((did) => this.opts.scope?.has(did))
    if (back.length) await this.repos.enqueue(back, { refetch: true })
    const gone = queued.filter((did) => !this.opts.scope?.has(did))
    if (gone.length) {
      try {
        await this.opts.writer.purge(gone, (tx) => markPurged(tx, gone))
      } catch (err) {
        // Still queued: tried again on a later round.
        log.error({ err, accounts: gone.length }, 'purge failed; retrying later')
        await new Promise((r) => setTimeout(r, 1000))
        return false
      }
      reposTotal.inc({ outcome: 'purged' }, gone.length)
      this.stats.purged += gone.length
      log.info({ accounts: gone.length }, 'purged accounts outside the community')
    }
    return true
  }

  /** Stops taking repos; run() returns once those in flight are written or given up. */
  stop(): void {
    this.stopping = true
  }

  /** Starts the CAR workers before any repo comes (CarReader.started). */
  started(): Promise<void> {
    return this.cars.started()
  }

  /** Ends the CAR workers; call once no run() is left going. */
  async close(): Promise<void> {
    await this.cars.stop()
  }

  /** Sets the out-of-sync gauges from the state table, every so often. */
  private async readGauges(): Promise<void> {
    if (Date.now() - this.gaugesAt < GAUGE_EVERY_MS) return
    this.gaugesAt = Date.now()
    const { repos, oldest } = await this.repos.outOfSync()
    outOfSyncRepos.set(repos)
    outOfSyncOldest.set(oldest ? (Date.now() - oldest.getTime()) / 1000 : 0)
  }
}

// The backfill worker: takes repos from the state table, resolves each DID to its PDS, fetches the
// repo's CAR (a bounded number at once, per host and in all), and writes its records through the
// same writer as the live stream, in chunks; the last chunk marks the repo done in its
// transaction. While a repo is in flight, the writer holds its live events and writes those newer
// than the fetched rev right after it (see @openplane/ingest's repo gate).
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
import { availableParallelism } from 'node:os'
import { getPds, type DidDocument } from '@atproto/identity'
import type { Kysely } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'
import type { IdentityPrefetch, IngestEvent, Scope, Writer } from '@openplane/ingest'
import { signingKeyOf } from '@openplane/signatures'
import { childLogger, counter, gauge } from '@openplane/telemetry'
import { RepoCarError, type RepoCar } from './car.ts'
import { CarReader } from './car-reader.ts'
import { Committer } from './committer.ts'
import { fetchRepo, RepoFetchError } from './fetch-repo.ts'
import { HostLimits } from './hosts.ts'
import {
  IndexedRecords,
  indexedRecords,
  repoEvents,
  type IndexedRepo,
  type RepoDiffCounts,
} from './reconcile.ts'
import { markFailed, markPurged, RepoTable, type RepoKey, type RetryPolicy } from './repos.ts'
import { ThreadOrder, uriOf, type Woken } from './thread-order.ts'

const log = childLogger('backfill')
const reposTotal = counter('openplane_backfill_repos_total', 'Repos backfilled, by outcome', [
  'outcome',
])
const recordsTotal = counter(
  'openplane_backfill_records_total',
  'Records of backfilled repos, by what the index needed (created, updated, deleted, unchanged, bad)',
  ['change'],
)
const bytesTotal = counter('openplane_backfill_bytes_total', 'CAR bytes fetched')
const failuresTotal = counter(
  'openplane_backfill_fetch_failures_total',
  'Failed repo fetches, by kind (a retried fetch counts each time)',
  ['kind'],
)
const inFlight = gauge('openplane_backfill_in_flight', 'Repos being fetched or written')
const outOfSyncRepos = gauge(
  'openplane_repos_out_of_sync',
  'Repos whose last fetch failed, waiting to be fetched again',
)
const outOfSyncOldest = gauge(
  'openplane_repos_out_of_sync_oldest_seconds',
  'How long the repo out of sync the longest has been failing to fetch',
)

/** How often the out-of-sync gauges are read from the state table. */
const GAUGE_EVERY_MS = 15_000

/** A repo's fetch given up because its held live events passed a bound (repo-gate.ts). */
class HeldPastBound extends Error {
  constructor() {
    super('live events held while fetching passed the bound')
  }
}

/** Where a repo's DID document comes from; throws when the DID does not resolve. */
export interface DidDocs {
  ensureResolve(did: string): Promise<DidDocument>
}

export interface BackfillOptions {
  db: Kysely<DatabaseSchema>
  writer: Writer
  /**
   * DID documents, for each repo's PDS and key: the identity resolver's (`idResolver.did`), or
   * the writer's lookup thread, whose cache the writer's handle checks then share.
   */
  didDocs: DidDocs
  /** Check each repo's signature and CIDs (the DID document's key). */
  verify: boolean
  /** Repos in flight at once, over all hosts. */
  concurrency: number
  /** Fetches at once from one PDS host. */
  perHost: number
  /** Fetches of one repo in this run before it is marked failed (transient failures). */
  maxAttempts: number
  /** Also take repos an earlier run marked failed. */
  retryFailed: boolean
  /**
   * CAR bytes held in memory over all repos being read; a repo that does not fit then is read as
   * it streams, its blocks past this size in a temporary file.
   */
  memoryBytes: number
  /** Threads reading and checking CARs beside the writer's (0: on its thread). */
  workers: number
  connectTimeoutMs: number
  idleTimeoutMs: number
  /** Record ops per written event; a repo's events are written a few at a time. */
  opsPerEvent: number
  /** Events of one repo handed to the writer at a time. */
  eventsPerWrite: number
  /** Record ops per write transaction at most (several repos share one). */
  opsPerWrite: number
  /** The accounts indexed, in a community deployment: others are neither fetched nor kept. */
  scope?: Scope
  /**
   * Identity lookups ahead of the writer: each repo's actor is looked up while its CAR is
   * fetched, so the writer's handle check for it finds the caches warm instead of waiting on
   * the network inside the transaction's turn.
   */
  prefetch?: Pick<IdentityPrefetch, 'see'>
  /** When a failed repo is fetched again. */
  retry: RetryPolicy
  /**
   * How long a repo's fetch may keep being retried (a host that keeps rate-limiting) before it
   * is given up for now: its live events are held meanwhile.
   */
  maxHoldMs: number
}

export const BACKFILL_DEFAULTS = {
  verify: false,
  concurrency: 128,
  perHost: 4,
  maxAttempts: 4,
  retryFailed: false,
  memoryBytes: 64 * 1024 * 1024,
  // One core stays with the writer's thread.
  workers: Math.min(4, Math.max(1, availableParallelism() - 1)),
  connectTimeoutMs: 30_000,
  idleTimeoutMs: 60_000,
  opsPerEvent: 100,
  eventsPerWrite: 20,
  opsPerWrite: 2000,
  retry: { baseMs: 60_000, maxMs: 6 * 3600_000 },
  maxHoldMs: 300_000,
} satisfies Partial<BackfillOptions>

export interface BackfillStats {
  startedAt: number
  done: number
  failed: number
  records: number
  bytes: number
  /** Fetches that failed and will be retried or were given up. */
  errors: number
  /** Accounts whose index was removed (they left the community). */
  purged: number
  inFlight: number
}

type Commit = Extract<IngestEvent, { type: 'commit' }>

/** A repo whose CAR is written but for records waiting for their context (thread-order.ts). */
interface Parked {
  host: string
  rev: string
  records: number
}

class RepoFailed extends Error {
  readonly host: string | undefined
  constructor(message: string, host: string | undefined) {
    super(message)
    this.host = host
  }
}

export class Backfill {
  private readonly opts: BackfillOptions
  readonly repos: RepoTable
  private readonly hosts: HostLimits
  private readonly busy = new Set<string>()
  private readonly order: ThreadOrder
  private readonly committer: Committer
  private readonly cars: CarReader
  private readonly parked = new Map<string, Parked>()
  /** Repos still being written whose woken records could not be written. */
  private readonly broken = new Set<string>()
  /** Repos found fresh (IndexedRepo.fresh) while their CAR is written: whether a write went. */
  private readonly fresh = new Map<string, { written: boolean }>()
  /** Per repo in flight, what gives up its fetch (its held events passed a bound). */
  private readonly aborts = new Map<string, AbortController>()
  private gaugesAt = 0
  private readonly indexed: IndexedRecords
  private stopping = false
  private seq = 0
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
    this.hosts = new HostLimits(opts.perHost)
    this.order = new ThreadOrder(opts.db)
    this.committer = new Committer(opts.writer, opts.opsPerWrite)
    this.cars = new CarReader({ workers: opts.workers, memoryBytes: opts.memoryBytes })
    this.indexed = new IndexedRecords(opts.db, opts.writer)
    opts.writer.gate.onOverflow((did) => {
      const abort = this.aborts.get(did)
      log.warn({ did, fetching: !!abort }, 'live events held for a repo passed the bound')
      abort?.abort(new HeldPastBound())
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
          const one: Promise<void> = this.one(did).finally(() => running.delete(one))
          running.add(one)
        }
        if (running.size === 0 && dids.length === 0) {
          // Records still waiting for context no repo will bring: written as they are.
          if (this.order.any()) {
            await this.wake(this.order.all())
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
        const page = await this.repos.page(200, this.cursor, retryFailed)
        for (const r of page) {
          this.cursor = r.key
          if (this.busy.has(r.did)) continue
          if (this.opts.scope && !this.opts.scope.has(r.did)) outside.push(r.did)
          else dids.push(r.did)
          if (dids.length >= room) return dids
        }
        if (page.length < 200) {
          this.cursor = undefined
          // Then failed repos whose time to be fetched again has come (in scope: one that left
          // the community is purged, not fetched).
          if (!retryFailed) {
            for (const did of await this.repos.due(room - dids.length, this.busy)) {
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

  /** Ends the CAR workers; call once no run() is left going. */
  async close(): Promise<void> {
    await this.cars.stop()
  }

  private async one(did: string): Promise<void> {
    const gate = this.opts.writer.gate
    gate.hold(did)
    // Read now, with the repos taken alongside, while its fetch starts: held, the repo's index
    // cannot change before its first write (a retry reads it again, after what it wrote).
    const indexed = this.indexed.load(did)
    const abort = new AbortController()
    this.aborts.set(did, abort)
    this.stats.inFlight++
    inFlight.set(this.stats.inFlight)
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
          if (outcome === 'done') this.repoDone(did)
          return
        } catch (caught) {
          // Its records waiting for context come again with the next fetch.
          this.order.drop(did)
          const err: unknown = abort.signal.aborted ? abort.signal.reason : caught
          const retryIn = abort.signal.aborted ? undefined : this.retryDelay(err, attempt)
          // A rate-limited host is waited for before the next fetch (HostLimits).
          const waits =
            err instanceof RepoFetchError && err.kind === 'rate-limited'
              ? Math.max(0, (err.retryAt ?? 0) - Date.now())
              : (retryIn ?? 0)
          const overdue = Date.now() - started + waits > this.opts.maxHoldMs
          if (retryIn !== undefined && !this.stopping && !overdue) {
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
        if (gate.holding(did) && !this.stopping) await this.letGo(did)
        this.busy.delete(did)
      }
      this.stats.inFlight--
      inFlight.set(this.stats.inFlight)
    }
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
        if (this.stopping) {
          log.warn({ did, err: messageOf(err) }, 'held events left for the next start')
          return
        }
        const delay = Math.min(30_000, 500 * 2 ** attempt)
        log.warn({ did, err: messageOf(err), retryMs: delay }, 'held events not written; retrying')
        await new Promise((r) => setTimeout(r, delay))
      }
    }
  }

  /** Sets the out-of-sync gauges from the state table, every so often. */
  private async readGauges(): Promise<void> {
    if (Date.now() - this.gaugesAt < GAUGE_EVERY_MS) return
    this.gaugesAt = Date.now()
    const { repos, oldest } = await this.repos.outOfSync()
    outOfSyncRepos.set(repos)
    outOfSyncOldest.set(oldest ? (Date.now() - oldest.getTime()) / 1000 : 0)
  }

  private repoDone(did: string): void {
    this.busy.delete(did)
    this.stats.done++
    reposTotal.inc({ outcome: 'done' })
  }

  /** How long to wait before fetching again, or undefined to give up now. */
  private retryDelay(err: unknown, attempt: number): number | undefined {
    if (!(err instanceof RepoFetchError)) return undefined
    this.stats.errors++
    failuresTotal.inc({ kind: err.kind })
    // A rate limit is the host's pacing, not the repo's fault: it does not use up attempts.
    if (err.kind === 'rate-limited') return 0
    if (err.kind !== 'transient' || attempt >= this.opts.maxAttempts) return undefined
    return Math.min(30_000, 500 * 2 ** attempt) * (0.5 + Math.random() / 2)
  }

  private async fail(did: string, err: unknown): Promise<void> {
    const host = err instanceof RepoFailed ? err.host : undefined
    const reason = messageOf(err)
    const kind =
      err instanceof RepoFetchError ? err.kind : err instanceof RepoCarError ? 'car' : 'other'
    if (kind === 'other') this.stats.errors++
    if (kind === 'other' || kind === 'car') failuresTotal.inc({ kind })
    this.stats.failed++
    reposTotal.inc({ outcome: 'failed' })
    const held = this.opts.writer.gate.newer(did).length
    log.warn({ did, host, reason, held }, 'repo backfill failed; out of sync until fetched')
    // Its held live events are written as the stock would have written them, in the
    // transaction that marks it failed.
    await this.letGo(did, (db) => markFailed(db, did, { reason, host }, this.opts.retry)).catch(
      (e: unknown) => {
        log.error({ err: e, did }, 'could not record a failed repo')
      },
    )
    // Its own waiting records go with it; replies waiting for its records will not get them.
    this.order.drop(did)
    await this.wake(this.order.sealed(did, true))
  }

  private async fetchAndWrite(
    did: string,
    signal: AbortSignal,
    indexed: Promise<IndexedRepo | undefined> | undefined,
  ): Promise<'done' | 'waiting'> {
    const { pds, signingKey } = await this.resolve(did)
    this.opts.prefetch?.see(did, new Date().toISOString())
    const host = new URL(pds).host
    const release = await this.hosts.acquire(host)
    let car
    try {
      signal.throwIfAborted()
      const body = await fetchRepo(pds, did, { ...this.opts, signal })
      if (this.opts.verify && !signingKey) throw new RepoFailed('DID document names no key', host)
      car = await this.cars.read(body, {
        did,
        signingKey: this.opts.verify ? signingKey : undefined,
      })
      this.hosts.ok(host)
    } catch (err) {
      if (err instanceof RepoFetchError && err.kind === 'rate-limited') {
        const until = this.hosts.rateLimited(host, err.retryAt)
        log.info({ host, until: new Date(until).toISOString() }, 'host rate-limited; pausing it')
      }
      if (err instanceof RepoCarError) throw new RepoFailed(err.message, host)
      throw err
    } finally {
      release()
    }
    try {
      this.stats.bytes += car.bytes
      bytesTotal.inc(car.bytes)
      const { counts, parked } = await this.write(did, host, car, signal, await indexed)
      this.stats.records += counts.records
      for (const change of ['created', 'updated', 'deleted', 'unchanged', 'bad'] as const) {
        if (counts[change]) recordsTotal.inc({ change }, counts[change])
      }
      // A parked repo is counted done by whoever writes its last waiting record.
      return parked ? 'waiting' : 'done'
    } finally {
      await car.close()
    }
  }

  /** The repo's events, a few at a time; the last write marks the repo done. */
  private async write(
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

  private async writeEvents(
    did: string,
    host: string,
    car: RepoCar,
    signal: AbortSignal,
    indexed: IndexedRepo,
  ): Promise<{ counts: RepoDiffCounts; parked: boolean }> {
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
      await this.writeReady(did, await this.order.split(did, pending))
      pending = []
    }
    signal.throwIfAborted()
    let ready = await this.order.split(did, pending)
    const done = { host, rev: car.rev, records: counts.records }
    if (this.order.waiting(did)) {
      await this.writeReady(did, ready)
      ready = []
    }
    if (this.broken.delete(did)) throw new RepoFailed('a waiting record could not be written', host)
    // Marked done when its last waiting record is written (see wake()); what it waited for may
    // have come meanwhile.
    const parked = this.order.waiting(did)
    if (parked) this.parked.set(did, done)
    else await this.writeReady(did, ready, done)
    await this.wake(this.order.sealed(did))
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
    await this.committer.write({ did, events: batch, finish }, done && { did, ...done })
    await this.wake(this.order.written(events.flatMap((e) => e.ops.map((op) => uriOf(did, op)))))
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

  /**
   * Writes records that stopped waiting; a parked repo left with none is done. Each repo's are
   * handed to the committer at once, so they share transactions: written one after another, the
   * replies to a busy thread (or all those left at the end of a run) took one transaction each.
   */
  private async wake(woken: Map<string, Woken>): Promise<void> {
    await Promise.all([...woken].map(([did, records]) => this.wakeOne(did, records)))
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
    const last = parked && !this.order.waiting(did) ? parked : undefined
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
      await this.fail(did, err)
      this.busy.delete(did)
      return
    }
    if (last) this.repoDone(did)
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

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}

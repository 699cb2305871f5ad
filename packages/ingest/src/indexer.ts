// Reads one source (a relay's or PDS's firehose, or Jetstream) into batches and hands them to the
// writer, one batch at a time. The cursor lives in Postgres with the data; state for /_health is
// kept here, beside the positions it reports (read, taken, committed), which change on every
// frame and batch: hence one class a little over 400 lines.
import type { Kysely } from 'kysely'
import type { IdResolver } from '@atproto/identity'
import type { DatabaseSchema } from '@openplane/db'
import type { IdentityOptions } from '@openplane/identity'
import { childLogger, counter, gauge, Tally, throttle } from '@openplane/telemetry'
import type { IngestEvent } from './events.ts'
import type { KeyLookup } from './asked-keys.ts'
import { createDecoder, failedFrame, type FrameDecoder } from './decoder.ts'
import type { FrameResult } from './frames.ts'
import { HeadProbe } from './head-probe.ts'
import type { IdentityPrefetch } from './identity-prefetch.ts'
import { subscribeUrl } from '@openplane/jetstream'
import { decodeJetstream } from './jetstream.ts'
import { checkRecords } from './checks.ts'
import { StreamSource } from './source.ts'
import { stageSeconds } from './stages.ts'
import type { Writer } from './writer.ts'

/** How long a partial batch waits, behind, for the frames still decoding (scheduleFlush). */
const BEHIND_WAIT_MS = 1000

const log = childLogger('indexer')
const frames = counter('openplane_firehose_frames_total', 'Firehose frames by outcome', ['outcome'])
/** One frame of an event counted (the most common outcome, counted per frame: tally.ts). */
const eventFrame = new Tally(frames, ['outcome']).of('event')
const lagSeconds = gauge(
  'openplane_firehose_lag_seconds',
  'Now minus the last applied event time',
  ['source'],
)
const droppedOps = counter(
  'openplane_firehose_dropped_ops_total',
  'Commit ops whose record block was missing or unreadable',
)
const appliedSeq = gauge('openplane_firehose_seq', 'Last applied firehose seq', ['source'])
const gapsTotal = counter(
  'openplane_source_gaps_total',
  'Times a source went on past events we had not read (a cursor past its replay window)',
  ['source', 'reason'],
)
const lagEvents = gauge(
  'openplane_firehose_lag_events',
  "Events between the source's live head (last probe) and the last applied event",
  ['source'],
)
const streamLag = gauge(
  'openplane_firehose_stream_lag_seconds',
  "Stream time between the source's live head (last probe) and the last applied event",
  ['source'],
)

export interface IndexerOptions {
  source: string
  db: Kysely<DatabaseSchema>
  writer: Writer
  idResolver: IdResolver
  verify: boolean
  /** Threads that decode and check frames beside the writer's (default 0: on its thread). */
  decodeWorkers?: number
  /** How decode workers resolve keys when verifying. */
  identity?: IdentityOptions
  /** Where signing keys come from when verifying: the writer's lookups (see asked-keys.ts). */
  keys?: KeyLookup
  batchSize: number
  batchWaitMs: number
  /** Where to start when no cursor is stored for this source (default: the live tip). */
  initialCursor?: number
  /** Looks up decoded events' identities ahead of the writer (off its path). */
  prefetch?: IdentityPrefetch
  /** How often to read the source's live head for lag in events (default 30 s; 0: never). */
  headProbeMs?: number
  /**
   * The source is Jetstream (JSON, trusted), not a firehose: its collections filter, and
   * whether messages come zstd-compressed with its dictionary. Its cursor is `time_us`, resumed
   * inclusively (an event applied twice changes nothing).
   */
  jetstream?: { compress: boolean; wantedCollections: string[] }
  /**
   * Jetstream says nothing when a cursor is older than what it keeps: it starts at the oldest
   * event it has. A first event after a reconnect this many seconds past the cursor is taken
   * for such a gap (default 60; the public Jetstream carries hundreds of events a second).
   */
  jetstreamGapSeconds?: number
  /** The source lost events for us: the repos they changed are to be fetched again. */
  onGap?: (gap: SourceGap) => void
}

export interface SourceGap {
  source: string
  /** `OutdatedCursor` (the firehose said so) or `jetstream-resumed-later`. */
  reason: string
  message: string
  /** Stream time of the last event taken before the gap; undefined: none is known. */
  after: string | undefined
  /** When it was found (ISO). */
  at: string
}

export interface IndexerState {
  source: string
  connected: boolean
  /** Last seq committed to Postgres. */
  seq: number | undefined
  /** Firehose time of the last applied event. */
  eventTime: string | undefined
  /** Wall clock minus the last applied event's time. */
  lagSeconds: number | undefined
  /** The source's live head at the last probe, and how far behind it the indexer is. */
  head: { seq: number; time: string; probedAt: string } | undefined
  lagEvents: number | undefined
  /** Head time minus last applied event time: lag in the stream's own clock. */
  streamLagSeconds: number | undefined
  /** The last failure of the connection or of a write, and when (ISO). */
  lastError: { message: string; at: string } | undefined
  /** Gaps the source left since start, and the last of them. */
  gaps: number
  lastGap: SourceGap | undefined
}

export class Indexer {
  private readonly opts: IndexerOptions
  private readonly firehose: StreamSource
  private readonly probe: HeadProbe | undefined
  private readonly decoder: FrameDecoder
  private pending: IngestEvent[] = []
  /** Seq of the last frame taken off the wire; the reconnect cursor. */
  private readSeq: number | undefined
  /** Stream time of the last event taken off the wire (or stored with the cursor). */
  private takenTime: string | undefined
  /** Jetstream: the cursor of the connection whose first event is not taken yet. */
  private askedFrom: number | undefined
  private gaps = 0
  private lastGap: SourceGap | undefined
  private committedSeq: number | undefined
  private eventTime: string | undefined
  private connected = false
  private lastError: IndexerState['lastError']
  /** While Postgres is away each retry fails alike: one line per 10 s. */
  private readonly writeFailedLog = throttle(10_000)
  /**
   * Frames in arrival order from `arrivedHead` on, each filled in once decoded: they decode in
   * parallel (on workers) but are taken in arrival order, from the front as they are ready.
   */
  private arrived: ({ res: FrameResult | undefined } | undefined)[] = []
  private arrivedHead = 0
  /** Waiting for every frame received so far to be taken. */
  private allTakenWaiters: (() => void)[] = []
  /** Frames received and not taken yet. */
  private queued = 0
  private flushing: Promise<void> | undefined
  private timer: NodeJS.Timeout | undefined
  private waiters: { seq: number; resolve: () => void }[] = []
  private stopped = false

  constructor(opts: IndexerOptions) {
    this.opts = opts
    const jetstream = opts.jetstream
    this.firehose = new StreamSource({
      endpoint: (cursor) => {
        if (jetstream) {
          this.askedFrom = cursor
          return subscribeUrl(opts.source, { ...jetstream, cursor })
        }
        const url = new URL('/xrpc/com.atproto.sync.subscribeRepos', opts.source)
        if (cursor !== undefined) url.searchParams.set('cursor', String(cursor))
        return url
      },
      // Frames received before a connection dropped may still be decoding: the cursor is the
      // last of them, or the relay would send them again and the index would see each twice
      // (out of order, which Sync 1.1 takes for a broken commit chain).
      cursor: async () => {
        await this.allTaken()
        return this.readSeq
      },
      onFrame: (bytes) => this.onFrame(bytes),
      // Frames waiting to be decoded count too.
      isFull: () => this.queued + this.pending.length >= opts.batchSize * 4,
      onConnectionChange: (c) => (this.connected = c),
      onError: (message) => this.failed(message),
    })
    this.decoder = jetstream
      ? jetstreamDecoder()
      : createDecoder({
          verify: opts.verify,
          idResolver: opts.idResolver,
          workers: opts.decodeWorkers ?? 0,
          identity: opts.identity,
          keys: opts.keys,
        })
    // Jetstream has no seq to count lag in events by: its lag is in seconds only.
    const every = jetstream ? 0 : (opts.headProbeMs ?? 30_000)
    this.probe = every > 0 ? new HeadProbe(opts.source, every) : undefined
  }

  async start(): Promise<void> {
    const row = await this.opts.db
      .selectFrom('openplane_cursor')
      .select(['seq', 'eventTime'])
      .where('source', '=', this.opts.source)
      .executeTakeFirst()
    this.committedSeq = row ? Number(row.seq) : undefined
    // A Date from node-postgres, a string from some drivers (PGlite): either way ISO here.
    this.takenTime = row?.eventTime ? new Date(row.eventTime).toISOString() : undefined
    this.readSeq = this.committedSeq ?? this.opts.initialCursor
    log.info({ source: this.opts.source, cursor: this.readSeq ?? 'live' }, 'indexer starting')
    this.firehose.start()
    this.probe?.start()
  }

  /**
   * Resolves once the decode threads' imports have run: for a caller that wants that start-up
   * paid before start().
   */
  started(): Promise<void> {
    return this.decoder.started()
  }

  async stop(): Promise<void> {
    this.stopped = true
    this.probe?.stop()
    this.firehose.stop()
    clearTimeout(this.timer)
    await this.allTaken()
    await this.decoder.stop()
    // The write under way, then what is left (a batch's worth; the rest comes again from the
    // source, from the cursor).
    await this.flushing
    await this.flush()
  }

  state(): IndexerState {
    const head = this.probe?.head
    // A head older than what is applied means the probe is behind: no lag, not a negative one.
    const lag = (a: number, b: number) => Math.max(0, a - b)
    return {
      source: this.opts.source,
      connected: this.connected,
      seq: this.committedSeq,
      eventTime: this.eventTime,
      lagSeconds: this.eventTime ? (Date.now() - Date.parse(this.eventTime)) / 1000 : undefined,
      head: head && { seq: head.seq, time: head.time, probedAt: new Date(head.at).toISOString() },
      lagEvents:
        head && this.committedSeq !== undefined ? lag(head.seq, this.committedSeq) : undefined,
      streamLagSeconds:
        head && this.eventTime
          ? lag(Date.parse(head.time), Date.parse(this.eventTime)) / 1000
          : undefined,
      lastError: this.lastError,
      gaps: this.gaps,
      lastGap: this.lastGap,
    }
  }

  private gap(reason: string, message: string): void {
    const gap: SourceGap = {
      source: this.opts.source,
      reason,
      message,
      after: this.takenTime,
      at: new Date().toISOString(),
    }
    this.gaps++
    this.lastGap = gap
    gapsTotal.inc({ source: this.opts.source, reason })
    log.warn(
      gap,
      'the source went on past events not read: repos changed meanwhile to be refetched',
    )
    this.opts.onGap?.(gap)
  }

  private failed(message: string): void {
    this.lastError = { message, at: new Date().toISOString() }
  }

  /** Resolves once every event up to `seq` is committed. */
  waitFor(seq: number): Promise<void> {
    if (this.committedSeq !== undefined && this.committedSeq >= seq) return Promise.resolve()
    return new Promise((resolve) => this.waiters.push({ seq, resolve }))
  }

  private onFrame(bytes: Uint8Array): void {
    this.queued++
    const slot: { res: FrameResult | undefined } = { res: undefined }
    this.arrived.push(slot)
    // A callback, not a promise chain: one of those per frame, with its closures, was garbage
    // the writer's thread collected thousands of times a second.
    this.decoder.decodeInto(bytes, (res) => {
      slot.res = res
      this.takeArrived()
    })
  }

  /** Takes the decoded frames at the front of the arrivals, in order. */
  private takeArrived(): void {
    const arrived = this.arrived
    let head = this.arrivedHead
    for (let slot = arrived[head]; slot?.res !== undefined; slot = arrived[head]) {
      arrived[head++] = undefined
      try {
        this.take(slot.res)
      } catch (err) {
        // Later frames still need taking.
        log.error({ err }, 'frame handling failed')
      }
      this.queued--
      this.firehose.resume()
    }
    if (head === arrived.length) {
      this.arrived = []
      this.arrivedHead = 0
      const waiters = this.allTakenWaiters
      this.allTakenWaiters = []
      for (const resolve of waiters) resolve()
    } else if (head > 4096) {
      this.arrived = arrived.slice(head)
      this.arrivedHead = 0
    } else this.arrivedHead = head
  }

  /** Resolves once every frame received so far is taken. */
  private allTaken(): Promise<void> {
    if (this.arrivedHead === this.arrived.length) return Promise.resolve()
    return new Promise((resolve) => this.allTakenWaiters.push(resolve))
  }

  private take(res: FrameResult): void {
    if (res.kind === 'outdated') {
      frames.inc({ outcome: 'outdated' })
      this.gap('OutdatedCursor', res.message)
      return
    }
    if (res.kind === 'event' && this.askedFrom !== undefined) {
      const late = (res.event.seq - this.askedFrom) / 1e6
      this.askedFrom = undefined
      if (late > (this.opts.jetstreamGapSeconds ?? 60)) {
        this.gap('jetstream-resumed-later', `first event ${late.toFixed(0)} s after the cursor`)
      }
    }
    if (res.kind === 'event') {
      eventFrame()
      if (res.dropped) {
        droppedOps.inc(res.dropped)
        log.warn(
          { seq: res.event.seq, did: res.event.did, dropped: res.dropped },
          'commit ops without a readable record',
        )
      }
      this.readSeq = res.event.seq
      if (res.event.did) this.takenTime = res.event.time
      this.opts.prefetch?.see(res.event.did, res.event.time)
      this.pending.push(res.event)
    } else if (res.kind === 'error') {
      frames.inc({ outcome: 'error_frame' })
      log.warn({ error: res.error, message: res.message }, 'firehose error frame')
      return
    } else {
      frames.inc({ outcome: res.kind })
      if (res.kind === 'malformed')
        log.warn({ seq: res.seq, reason: res.reason }, 'malformed frame skipped')
      if (res.seq === undefined) return
      this.readSeq = res.seq
      // Keep the cursor moving past frames we skip: an empty commit carries only the seq.
      this.pending.push({ type: 'skip', seq: res.seq, time: new Date().toISOString(), did: '' })
    }
    // Decoding goes on while a batch is written (the socket pauses when four batches wait), so
    // the next batch is decoded, and planned, while Postgres writes this one.
    if (this.pending.length >= this.opts.batchSize) {
      if (!this.flushing) void this.flush()
    } else this.scheduleFlush()
  }

  /**
   * Flushes a partial batch after a while. At the live tip that is `batchWaitMs`, for latency.
   * Behind (frames enough to fill the batch are still decoding: a backlog, or decoding slower
   * than writing, as when verifying) the batch waits for them, up to BEHIND_WAIT_MS: each batch
   * costs statements and a commit whatever its size, and small ones written as fast as they
   * come take the cores the decoding needs.
   */
  private scheduleFlush(): void {
    if (this.timer || this.stopped) return
    const behind = this.queued > this.opts.batchSize - this.pending.length
    const wait = behind ? Math.max(this.opts.batchWaitMs, BEHIND_WAIT_MS) : this.opts.batchWaitMs
    this.timer = setTimeout(() => {
      this.timer = undefined
      void this.flush()
    }, wait)
  }

  /**
   * Writes the pending events, a batch at a time. Asked while a batch is being written, it
   * answers that write: when it ends, the next batch is flushed or scheduled from there (below).
   * Chaining another flush to it each time instead kept every such request waiting for the next
   * write and the one after: at the live tip, a partial batch's timer fires several times per
   * write, and the waiting requests grew by that many per batch, without end (15 million
   * promises, 1.5 GB, in a 20-minute soak).
   */
  private flush(): Promise<void> {
    if (this.flushing) return this.flushing
    if (!this.pending.length) return Promise.resolve()
    clearTimeout(this.timer)
    this.timer = undefined
    const batch = this.pending.splice(0, this.opts.batchSize)
    // A full batch waiting behind this one is exactly what the next flush takes (events only
    // join at the end): the writer plans it while this one is written.
    const next =
      this.pending.length >= this.opts.batchSize
        ? this.pending.slice(0, this.opts.batchSize)
        : undefined
    this.flushing = this.opts.writer
      .applyBatch(this.opts.source, batch, { next })
      .then(() => {
        const last = batch[batch.length - 1]!
        this.committedSeq = last.seq
        if (last.did) this.eventTime = last.time
        appliedSeq.set({ source: this.opts.source }, last.seq)
        const state = this.state()
        if (this.eventTime) lagSeconds.set({ source: this.opts.source }, state.lagSeconds ?? 0)
        if (state.lagEvents !== undefined)
          lagEvents.set({ source: this.opts.source }, state.lagEvents)
        if (state.streamLagSeconds !== undefined)
          streamLag.set({ source: this.opts.source }, state.streamLagSeconds)
        this.waiters = this.waiters.filter((w) => (w.seq <= last.seq ? (w.resolve(), false) : true))
      })
      .catch((err: unknown) => {
        // The writer isolates bad events, so this is Postgres itself failing: put the batch back
        // and retry rather than skip data.
        this.writeFailedLog((suppressed) =>
          log.error({ err, suppressed }, 'batch could not be written; retrying'),
        )
        this.failed(`write failed: ${err instanceof Error ? err.message : String(err)}`)
        this.pending.unshift(...batch)
        return new Promise<void>((r) => setTimeout(r, 1000))
      })
      .finally(() => {
        this.flushing = undefined
        this.firehose.resume()
        if (this.pending.length >= this.opts.batchSize) void this.flush()
        else if (this.pending.length) this.scheduleFlush()
      })
    return this.flushing
  }
}

/** Jetstream messages are decoded and checked on this thread (JSON: no CAR, no hashing). */
function jetstreamDecoder(): FrameDecoder {
  const decode = (bytes: Uint8Array): FrameResult => {
    const started = performance.now()
    const res = decodeJetstream(bytes)
    if (res.kind === 'event' && res.event.type === 'commit') checkRecords(res.event)
    stageSeconds.inc({ stage: 'decode' }, (performance.now() - started) / 1000)
    return res
  }
  return {
    decode: (bytes) => Promise.resolve(decode(bytes)),
    // Called later, as a worker's answer would be: frames are taken outside the socket's
    // message handler, in a batch per turn of the event loop.
    decodeInto: (bytes, done) =>
      queueMicrotask(() => {
        let res: FrameResult
        try {
          res = decode(bytes)
        } catch (err) {
          res = failedFrame(err)
        }
        done(res)
      }),
    started: () => Promise.resolve(),
    stop: () => Promise.resolve(),
  }
}

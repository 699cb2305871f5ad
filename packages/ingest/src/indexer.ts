// Reads one firehose source into batches and hands them to the writer, one batch at a time.
// The cursor lives in Postgres with the data; state for /_health is kept here.
import type { Kysely } from 'kysely'
import type { IdResolver } from '@atproto/identity'
import type { DatabaseSchema } from '@openplane/db'
import { childLogger, counter, gauge } from '@openplane/telemetry'
import type { IngestEvent } from './events.ts'
import { decodeFrame } from './frames.ts'
import { FirehoseSource } from './source.ts'
import type { Writer } from './writer.ts'

const log = childLogger('indexer')
const frames = counter('openplane_firehose_frames_total', 'Firehose frames by outcome', ['outcome'])
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

export interface IndexerOptions {
  source: string
  db: Kysely<DatabaseSchema>
  writer: Writer
  idResolver: IdResolver
  verify: boolean
  batchSize: number
  batchWaitMs: number
  /** Where to start when no cursor is stored for this source (default: the live tip). */
  initialCursor?: number
}

export interface IndexerState {
  source: string
  connected: boolean
  /** Last seq committed to Postgres. */
  seq: number | undefined
  /** Firehose time of the last applied event. */
  eventTime: string | undefined
  lagSeconds: number | undefined
}

export class Indexer {
  private readonly opts: IndexerOptions
  private readonly firehose: FirehoseSource
  private pending: IngestEvent[] = []
  /** Seq of the last frame taken off the wire; the reconnect cursor. */
  private readSeq: number | undefined
  private committedSeq: number | undefined
  private eventTime: string | undefined
  private connected = false
  private decoding: Promise<void> = Promise.resolve()
  /** Frames received and not decoded yet. */
  private queued = 0
  private flushing: Promise<void> | undefined
  private timer: NodeJS.Timeout | undefined
  private waiters: { seq: number; resolve: () => void }[] = []
  private stopped = false

  constructor(opts: IndexerOptions) {
    this.opts = opts
    this.firehose = new FirehoseSource({
      url: opts.source,
      cursor: () => this.readSeq,
      onFrame: (bytes) => this.onFrame(bytes),
      // Frames waiting to be decoded count too: decoding stalls while a full batch is written.
      isFull: () => this.queued + this.pending.length >= opts.batchSize * 4,
      onConnectionChange: (c) => (this.connected = c),
    })
  }

  async start(): Promise<void> {
    const row = await this.opts.db
      .selectFrom('openplane_cursor')
      .select('seq')
      .where('source', '=', this.opts.source)
      .executeTakeFirst()
    this.committedSeq = row ? Number(row.seq) : undefined
    this.readSeq = this.committedSeq ?? this.opts.initialCursor
    log.info({ source: this.opts.source, cursor: this.readSeq ?? 'live' }, 'indexer starting')
    this.firehose.start()
  }

  async stop(): Promise<void> {
    this.stopped = true
    this.firehose.stop()
    clearTimeout(this.timer)
    await this.decoding
    await this.flush()
  }

  state(): IndexerState {
    return {
      source: this.opts.source,
      connected: this.connected,
      seq: this.committedSeq,
      eventTime: this.eventTime,
      lagSeconds: this.eventTime ? (Date.now() - Date.parse(this.eventTime)) / 1000 : undefined,
    }
  }

  /** Resolves once every event up to `seq` is committed. */
  waitFor(seq: number): Promise<void> {
    if (this.committedSeq !== undefined && this.committedSeq >= seq) return Promise.resolve()
    return new Promise((resolve) => this.waiters.push({ seq, resolve }))
  }

  private onFrame(bytes: Uint8Array): void {
    // Decode in arrival order; decoding is async (CAR parsing) but must not reorder events.
    this.queued++
    this.decoding = this.decoding
      .then(() => this.decode(bytes))
      // A failure here must not break the chain: later frames still need decoding.
      .catch((err: unknown) => log.error({ err }, 'frame handling failed'))
      .finally(() => {
        this.queued--
        this.firehose.resume()
      })
  }

  private async decode(bytes: Uint8Array): Promise<void> {
    const res = await decodeFrame(bytes, {
      verify: this.opts.verify,
      idResolver: this.opts.idResolver,
    })
    if (res.kind === 'event') {
      frames.inc({ outcome: 'event' })
      if (res.dropped) {
        droppedOps.inc(res.dropped)
        log.warn(
          { seq: res.event.seq, did: res.event.did, dropped: res.dropped },
          'commit ops without a readable record',
        )
      }
      this.readSeq = res.event.seq
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
    if (this.pending.length >= this.opts.batchSize) await this.flush()
    else this.scheduleFlush()
  }

  private scheduleFlush(): void {
    if (this.timer || this.stopped) return
    this.timer = setTimeout(() => {
      this.timer = undefined
      void this.flush()
    }, this.opts.batchWaitMs)
  }

  private flush(): Promise<void> {
    if (this.flushing) return this.flushing.then(() => this.flush())
    if (!this.pending.length) return Promise.resolve()
    const batch = this.pending.splice(0, this.opts.batchSize)
    this.flushing = this.opts.writer
      .applyBatch(this.opts.source, batch)
      .then(() => {
        const last = batch[batch.length - 1]!
        this.committedSeq = last.seq
        if (last.did) this.eventTime = last.time
        appliedSeq.set({ source: this.opts.source }, last.seq)
        if (this.eventTime)
          lagSeconds.set({ source: this.opts.source }, this.state().lagSeconds ?? 0)
        this.waiters = this.waiters.filter((w) => (w.seq <= last.seq ? (w.resolve(), false) : true))
      })
      .catch((err: unknown) => {
        // The writer isolates bad events, so this is Postgres itself failing: put the batch back
        // and retry rather than skip data.
        log.error({ err }, 'batch could not be written; retrying')
        this.pending.unshift(...batch)
        return new Promise<void>((r) => setTimeout(r, 1000))
      })
      .finally(() => {
        this.flushing = undefined
        this.firehose.resume()
        if (this.pending.length) this.scheduleFlush()
      })
    return this.flushing
  }
}

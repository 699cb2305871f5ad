// Subscribes to each configured labeler (com.atproto.label.subscribeLabels at the #atproto_labeler
// endpoint of its DID document), checks every label against the labeler's #atproto_label key, and
// writes batches with the labeler's cursor. Nothing fills the stock's label table otherwise.
//
// A signature that does not verify makes the labeler's DID document be read again once (it may
// have rotated its key); a label that still does not verify is refused and counted. A labeler
// unreachable, or Postgres down, is retried with backoff from the stored cursor.
import { setTimeout as wait } from 'node:timers/promises'
import { getServiceEndpoint, getVerificationMaterial } from '@atproto/common-web'
import { getDidKeyFromMultibase, type IdResolver } from '@atproto/identity'
import { decodeAll } from '@atproto/lex-cbor'
import type { Kysely } from 'kysely'
import WebSocket from 'ws'
import { readStreamCursor, type DatabaseSchema } from '@openplane/db'
import { childLogger, counter, gauge } from '@openplane/telemetry'
import { applyLabels } from './apply.ts'
import { checkLabel, signedBy, type LabelRow } from './label.ts'

const log = childLogger('labels')

const labelsTotal = counter(
  'openplane_labels_total',
  'Labels read, by labeler and outcome (applied, negation, invalid, bad_signature)',
  ['labeler', 'outcome'],
)
const errorsTotal = counter(
  'openplane_labeler_errors_total',
  'Failed connections, streams or writes, by labeler (each is retried with backoff)',
  ['labeler'],
)
const connectedGauge = gauge('openplane_labeler_connected', '1 while subscribed', ['labeler'])
const cursorGauge = gauge('openplane_labeler_cursor', 'Last applied seq, by labeler', ['labeler'])

export interface LabelerState {
  did: string
  endpoint: string | null
  connected: boolean
  cursor: number | null
  applied: number
  refused: number
  lastError: string | null
}

export interface LabelsOptions {
  db: Kysely<DatabaseSchema>
  idResolver: IdResolver
  /** The labelers' DIDs. */
  labelers: string[]
  /**
   * Also every account that publishes an `app.bsky.labeler.service` record in the index, looked
   * for this often (0: never).
   */
  discoverEveryMs?: number
  backoff?: { minMs: number; maxMs: number }
  /** Frames applied in one transaction at most. */
  batchFrames?: number
}

interface Labeler {
  endpoint: string
  key: string
}

interface Frame {
  seq: number
  labels: unknown[]
}

/** A #labels frame, an #info or error frame (logged), or a reason the frame is malformed. */
function decodeFrame(bytes: Uint8Array): Frame | { note: string } | { malformed: string } {
  let parts: unknown[]
  try {
    parts = [...decodeAll(bytes)]
  } catch (err) {
    return { malformed: `undecodable: ${(err as Error).message}` }
  }
  const [header, body] = parts as [Record<string, unknown>?, Record<string, unknown>?]
  if (parts.length !== 2 || !header || !body) return { malformed: 'not a header and a body' }
  if (header.op === -1) return { note: `error ${String(body.error)}: ${String(body.message)}` }
  if (header.t === '#info') return { note: `info ${String(body.name)}: ${String(body.message)}` }
  if (header.op !== 1 || header.t !== '#labels')
    return { malformed: `unknown frame ${String(header.t)}` }
  const { seq, labels } = body
  if (typeof seq !== 'number' || !Number.isSafeInteger(seq) || !Array.isArray(labels)) {
    return { malformed: '#labels without a seq and labels' }
  }
  return { seq, labels }
}

export class LabelConsumer {
  readonly #opts: Required<LabelsOptions>
  readonly #state = new Map<string, LabelerState>()
  readonly #labelers = new Map<string, Labeler>()
  readonly #waiters = new Set<() => void>()
  #ac: AbortController | undefined
  #loops: Promise<void>[] = []

  constructor(opts: LabelsOptions) {
    this.#opts = {
      backoff: { minMs: 250, maxMs: 60_000 },
      batchFrames: 100,
      discoverEveryMs: 0,
      ...opts,
    }
    for (const did of opts.labelers) this.#add(did)
  }

  start(): void {
    if (this.#ac) return
    this.#ac = new AbortController()
    const signal = this.#ac.signal
    this.#loops = [...this.#state.keys()].map((did) => this.#run(did, signal))
    if (this.#opts.discoverEveryMs > 0) this.#loops.push(this.#discover(signal))
  }

  async stop(): Promise<void> {
    this.#ac?.abort()
    this.#ac = undefined
    await Promise.all(this.#loops)
  }

  #add(did: string): boolean {
    if (this.#state.has(did)) return false
    this.#state.set(did, {
      did,
      endpoint: null,
      connected: false,
      cursor: null,
      applied: 0,
      refused: 0,
      lastError: null,
    })
    return true
  }

  /** Subscribes to each account that publishes a labeler service record, as the index finds them. */
  async #discover(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        const rows = await this.#opts.db
          .selectFrom('labeler')
          .select('creator')
          .distinct()
          .execute()
        for (const { creator } of rows) {
          if (!this.#add(creator)) continue
          log.info({ labeler: creator }, 'labeler found in the index; subscribing')
          this.#loops.push(this.#run(creator, signal))
        }
      } catch (err) {
        log.warn({ err }, 'could not read the indexed labelers')
      }
      await sleep(this.#opts.discoverEveryMs, signal)
    }
  }

  state(): LabelerState[] {
    return [...this.#state.values()].map((s) => ({ ...s }))
  }

  /** Resolves once each labeler named has applied up to its seq. */
  async waitFor(targets: Record<string, number>): Promise<void> {
    for (const did of Object.keys(targets)) {
      if (!this.#state.has(did)) throw new Error(`${did} is not a configured labeler`)
    }
    const reached = () =>
      Object.entries(targets).every(([did, seq]) => (this.#state.get(did)!.cursor ?? 0) >= seq)
    while (!reached()) await new Promise<void>((resolve) => this.#waiters.add(resolve))
  }

  async #labeler(did: string, force: boolean): Promise<Labeler> {
    const known = this.#labelers.get(did)
    if (known && !force) return known
    const doc = await this.#opts.idResolver.did.resolve(did, force)
    if (!doc) throw new Error(`no DID document for labeler ${did}`)
    const endpoint = getServiceEndpoint(doc, { id: '#atproto_labeler', type: 'AtprotoLabeler' })
    const material = getVerificationMaterial(doc, 'atproto_label')
    const key = material && getDidKeyFromMultibase(material)
    if (!endpoint || !key) throw new Error(`labeler ${did} has no #atproto_labeler service or key`)
    const labeler = { endpoint, key }
    this.#labelers.set(did, labeler)
    return labeler
  }

  async #run(did: string, signal: AbortSignal): Promise<void> {
    const state = this.#state.get(did)!
    const { minMs, maxMs } = this.#opts.backoff
    let delay = minMs
    while (!signal.aborted) {
      try {
        const labeler = await this.#labeler(did, false)
        state.endpoint = labeler.endpoint
        const stored = await readStreamCursor(this.#opts.db, `labels:${did}`)
        this.#advance(state, stored === undefined ? null : Number(stored))
        await this.#subscribe(did, labeler, state, signal, () => (delay = minMs))
      } catch (err) {
        if (signal.aborted) break
        state.lastError = err instanceof Error ? err.message : String(err)
        errorsTotal.inc({ labeler: did })
        log.warn({ err, labeler: did, retryMs: delay }, 'labeler stream failed; retrying')
      }
      state.connected = false
      connectedGauge.set({ labeler: did }, 0)
      await sleep(delay, signal)
      delay = Math.min(delay * 2, maxMs)
    }
  }

  /** One connection, until it closes or fails; frames are applied in order, in batches. */
  #subscribe(
    did: string,
    labeler: Labeler,
    state: LabelerState,
    signal: AbortSignal,
    onOpen: () => void,
  ): Promise<void> {
    const url = new URL('/xrpc/com.atproto.label.subscribeLabels', labeler.endpoint)
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:'
    url.searchParams.set('cursor', String(state.cursor ?? 0))
    return new Promise<void>((resolve, reject) => {
      const ws = new WebSocket(url)
      const queue: Frame[] = []
      let draining: Promise<void> | undefined
      let failed = false
      const fail = (err: unknown) => {
        if (failed) return
        failed = true
        ws.terminate()
        reject(err)
      }
      const onAbort = () => ws.close()
      signal.addEventListener('abort', onAbort, { once: true })
      const drain = async () => {
        while (queue.length && !failed) {
          const frames = queue.splice(0, this.#opts.batchFrames)
          if (queue.length < this.#opts.batchFrames) ws.resume()
          await this.#apply(did, frames, state)
        }
      }
      ws.on('open', () => {
        state.connected = true
        state.lastError = null
        connectedGauge.set({ labeler: did }, 1)
        onOpen()
      })
      ws.on('message', (data: Buffer) => {
        const frame = decodeFrame(data)
        if ('note' in frame) return log.info({ labeler: did, note: frame.note }, 'labeler says')
        if ('malformed' in frame) {
          labelsTotal.inc({ labeler: did, outcome: 'invalid' })
          return log.warn({ labeler: did, reason: frame.malformed }, 'malformed labeler frame')
        }
        queue.push(frame)
        // Backpressure: stop reading while a few batches wait.
        if (queue.length >= this.#opts.batchFrames * 4) ws.pause()
        draining ??= drain()
          .catch(fail)
          .finally(() => {
            draining = undefined
            if (queue.length && !failed) draining = drain().catch(fail)
          })
      })
      ws.on('error', fail)
      ws.on('close', () => {
        signal.removeEventListener('abort', onAbort)
        void (draining ?? Promise.resolve()).then(() => (failed ? undefined : resolve()))
      })
    })
  }

  /** Checks and verifies the frames' labels, then writes them with the last seq. */
  async #apply(did: string, frames: Frame[], state: LabelerState): Promise<void> {
    const rows: LabelRow[] = []
    let refused = 0
    let rekeyed = false
    let labeler = await this.#labeler(did, false)
    for (const frame of frames) {
      for (const raw of frame.labels) {
        const checked = checkLabel(raw, did)
        if (!checked.ok) {
          refused++
          labelsTotal.inc({ labeler: did, outcome: 'invalid' })
          log.warn({ labeler: did, seq: frame.seq, reason: checked.detail }, 'label refused')
          continue
        }
        let valid = await signedBy(labeler.key, checked.signed, checked.sig)
        if (!valid && !rekeyed) {
          // The labeler may have rotated its key: read its document again, once per batch.
          rekeyed = true
          labeler = await this.#labeler(did, true)
          valid = await signedBy(labeler.key, checked.signed, checked.sig)
        }
        if (!valid) {
          refused++
          labelsTotal.inc({ labeler: did, outcome: 'bad_signature' })
          log.warn(
            { labeler: did, seq: frame.seq, uri: checked.row.uri },
            'label signature invalid',
          )
          continue
        }
        rows.push(checked.row)
      }
    }
    const seq = frames[frames.length - 1]!.seq
    await applyLabels(this.#opts.db, rows, `labels:${did}`, seq)
    for (const r of rows) labelsTotal.inc({ labeler: did, outcome: r.neg ? 'negation' : 'applied' })
    state.applied += rows.length
    state.refused += refused
    this.#advance(state, seq)
  }

  #advance(state: LabelerState, cursor: number | null): void {
    state.cursor = cursor
    if (cursor !== null) cursorGauge.set({ labeler: state.did }, cursor)
    for (const w of [...this.#waiters]) {
      this.#waiters.delete(w)
      w()
    }
  }
}

/** Waits `ms`, or less if the signal aborts (a stop need not wait out a backoff). */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return wait(ms, undefined, { signal }).catch(() => undefined)
}

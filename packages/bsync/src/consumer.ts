// Tails bsync's three operation streams (ScanOperations, ScanMuteOperations, ScanNotifOperations),
// each in its own loop: a page is checked, planned and applied in one transaction with the
// stream's cursor, so a restart resumes after the last page applied and nothing applies twice.
// The stock's consumer keeps its cursors in memory and starts every process from the beginning.
//
// Failures: bsync unreachable or Postgres down → the page is retried with backoff, from the
// cursor as Postgres has it (a commit whose reply was lost is not applied again). An operation
// that does not parse is skipped and counted; a page Postgres refuses is redone one operation at
// a time, each behind a savepoint, and the refused ones are skipped and counted.
import { setTimeout as wait } from 'node:timers/promises'
import { sql, type Kysely, type Transaction } from 'kysely'
import { createPromiseClient, type Interceptor, type PromiseClient } from '@connectrpc/connect'
import { createConnectTransport } from '@connectrpc/connect-node'
import { readStreamCursor, saveStreamCursor, type DatabaseSchema } from '@openplane/db'
import {
  BsyncService,
  type MuteOperation,
  type NotifOperation,
  type Operation,
} from '@openplane/proto/bsync'
import { childLogger, counter, gauge } from '@openplane/telemetry'
import { applyMutes, applyNotifs, applyOperations, loadForOperations } from './apply.ts'
import { muteChange, notifChange, privateOp, Skip } from './ops.ts'
import { Clock, planMutes, planNotifs, planOperations } from './plan.ts'

const log = childLogger('bsync')

const operationsTotal = counter(
  'openplane_bsync_operations_total',
  'bsync operations read, by stream and outcome (applied, skipped: did not parse, refused: the table refused it)',
  ['stream', 'outcome'],
)
const errorsTotal = counter(
  'openplane_bsync_errors_total',
  'Failed scans or page writes, by stream (each is retried with backoff)',
  ['stream'],
)
const connectedGauge = gauge(
  'openplane_bsync_connected',
  "1 while the stream's last scan succeeded",
  ['stream'],
)
const cursorGauge = gauge('openplane_bsync_cursor', 'Last applied operation id, by stream', [
  'stream',
])

export type StreamName = 'op' | 'mute' | 'notif'
export const STREAMS: readonly StreamName[] = ['op', 'mute', 'notif']
export type BsyncCursors = Partial<Record<StreamName, string>>

export interface BsyncOptions {
  db: Kysely<DatabaseSchema>
  url: string
  apiKey?: string
  httpVersion?: '1.1' | '2'
  ignoreBadTls?: boolean
  /** Operations asked for per scan (bsync's own default is 1000). */
  pageSize?: number
  /** Retry delays: from minMs, doubling to maxMs. */
  backoff?: { minMs: number; maxMs: number }
}

export interface StreamState {
  cursor: string | null
  connected: boolean
  applied: number
  skipped: number
  lastError: string | null
}

type Tx = Transaction<DatabaseSchema>

interface Page<Op> {
  operations: Op[]
  cursor: string
}

/** How one stream is read and written. */
interface Stream<Op> {
  name: StreamName
  scan(
    client: PromiseClient<typeof BsyncService>,
    req: { cursor: string; limit: number },
    signal: AbortSignal,
  ): Promise<Page<Op>>
  /** Checks, plans and applies; returns the operations skipped (with why). */
  apply(tx: Tx, ops: Op[]): Promise<Skipped[]>
}

interface Skipped {
  id: string
  reason: string
  outcome: 'skipped' | 'refused'
}

/** Decodes each operation; the ones that do not parse come back as skips. */
function decode<Op extends { id: string }, T>(
  ops: Op[],
  fn: (op: Op) => T,
): { ok: T[]; skipped: Skipped[] } {
  const ok: T[] = []
  const skipped: Skipped[] = []
  for (const op of ops) {
    try {
      ok.push(fn(op))
    } catch (err) {
      if (!(err instanceof Skip)) throw err
      skipped.push({ id: op.id, reason: err.message, outcome: 'skipped' })
    }
  }
  return { ok, skipped }
}

function streams(clock: Clock) {
  const op: Stream<Operation> = {
    name: 'op',
    scan: (c, req, signal) => c.scanOperations(req, { signal }),
    async apply(tx, ops) {
      const { ok, skipped } = decode(ops, privateOp)
      const plan = planOperations(ok, await loadForOperations(tx, ok), clock)
      await applyOperations(tx, plan)
      // The stock logs these and keeps the private_data row, as we do.
      for (const r of plan.refused)
        log.info(
          { actor: r.op.actor, key: r.op.key, reason: r.reason },
          'bsync operation not indexed',
        )
      return skipped
    },
  }
  const mute: Stream<MuteOperation> = {
    name: 'mute',
    scan: (c, req, signal) => c.scanMuteOperations(req, { signal }),
    async apply(tx, ops) {
      const { ok, skipped } = decode(ops, muteChange)
      await applyMutes(tx, planMutes(ok, clock))
      return skipped
    },
  }
  const notif: Stream<NotifOperation> = {
    name: 'notif',
    scan: (c, req, signal) => c.scanNotifOperations(req, { signal }),
    async apply(tx, ops) {
      const { ok, skipped } = decode(ops, notifChange)
      await applyNotifs(tx, planNotifs(ok, clock))
      return skipped
    },
  }
  return [op, mute, notif] as const
}

export class BsyncConsumer {
  readonly #opts: Required<Omit<BsyncOptions, 'apiKey'>> & { apiKey?: string }
  readonly #client: PromiseClient<typeof BsyncService>
  readonly #state = new Map<StreamName, StreamState>()
  readonly #waiters = new Set<() => void>()
  #ac: AbortController | undefined
  #loops: Promise<void>[] = []

  constructor(opts: BsyncOptions) {
    this.#opts = {
      httpVersion: '2',
      ignoreBadTls: false,
      pageSize: 1000,
      backoff: { minMs: 100, maxMs: 30_000 },
      ...opts,
    }
    const auth: Interceptor[] = opts.apiKey
      ? [(next) => (req) => (req.header.set('authorization', `Bearer ${opts.apiKey}`), next(req))]
      : []
    const transport = createConnectTransport({
      baseUrl: opts.url,
      httpVersion: this.#opts.httpVersion,
      nodeOptions: { rejectUnauthorized: !this.#opts.ignoreBadTls },
      interceptors: auth,
    })
    this.#client = createPromiseClient(BsyncService, transport)
    for (const s of STREAMS) {
      this.#state.set(s, {
        cursor: null,
        connected: false,
        applied: 0,
        skipped: 0,
        lastError: null,
      })
    }
  }

  start(): void {
    if (this.#ac) return
    this.#ac = new AbortController()
    const clock = new Clock()
    this.#loops = streams(clock).map((s) =>
      this.#run(s as Stream<{ id: string }>, this.#ac!.signal),
    )
  }

  async stop(): Promise<void> {
    this.#ac?.abort()
    this.#ac = undefined
    await Promise.all(this.#loops)
    this.#loops = []
  }

  state(): Record<StreamName, StreamState> {
    return Object.fromEntries([...this.#state].map(([k, v]) => [k, { ...v }])) as Record<
      StreamName,
      StreamState
    >
  }

  /** Resolves once every stream named has applied up to its target operation id. */
  async waitFor(targets: BsyncCursors, signal?: AbortSignal): Promise<void> {
    const reached = () =>
      STREAMS.every((s) => {
        const target = targets[s]
        if (!target) return true
        return BigInt(this.#state.get(s)!.cursor || '0') >= BigInt(target)
      })
    while (!reached()) {
      signal?.throwIfAborted()
      await new Promise<void>((resolve) => {
        const done = () => {
          this.#waiters.delete(done)
          signal?.removeEventListener('abort', done)
          resolve()
        }
        this.#waiters.add(done)
        signal?.addEventListener('abort', done, { once: true })
      })
    }
  }

  async #run(stream: Stream<{ id: string }>, signal: AbortSignal): Promise<void> {
    const state = this.#state.get(stream.name)!
    const key = `bsync:${stream.name}`
    const { minMs, maxMs } = this.#opts.backoff
    let delay = minMs
    // undefined: read it from Postgres (at start, and after any failure: a page whose COMMIT
    // reply was lost shows there as applied, and is not applied again).
    let cursor: string | undefined
    while (!signal.aborted) {
      try {
        cursor ??= (await readStreamCursor(this.#opts.db, key)) ?? ''
        this.#advance(state, stream.name, cursor)
        const page = await stream.scan(this.#client, { cursor, limit: this.#opts.pageSize }, signal)
        state.connected = true
        connectedGauge.set({ stream: stream.name }, 1)
        if (page.operations.length) {
          await this.#applyPage(stream, page, key, state)
          cursor = page.cursor
        }
        this.#advance(state, stream.name, cursor)
        delay = minMs
      } catch (err) {
        if (signal.aborted) break
        cursor = undefined
        state.connected = false
        state.lastError = err instanceof Error ? err.message : String(err)
        connectedGauge.set({ stream: stream.name }, 0)
        errorsTotal.inc({ stream: stream.name })
        log.warn({ err, stream: stream.name, retryMs: delay }, 'bsync stream failed; retrying')
        await sleep(delay, signal)
        delay = Math.min(delay * 2, maxMs)
      }
    }
  }

  async #applyPage(
    stream: Stream<{ id: string }>,
    page: Page<{ id: string }>,
    key: string,
    state: StreamState,
  ): Promise<void> {
    let skipped: Skipped[]
    try {
      skipped = await this.#opts.db.transaction().execute(async (tx) => {
        const s = await stream.apply(tx, page.operations)
        await saveStreamCursor(tx, key, page.cursor)
        return s
      })
    } catch (err) {
      if (!refusedByPostgres(err)) throw err
      log.warn(
        { err, stream: stream.name, operations: page.operations.length },
        'bsync page refused; applying it one operation at a time',
      )
      skipped = await this.#opts.db.transaction().execute(async (tx) => {
        const out: Skipped[] = []
        for (const op of page.operations) {
          try {
            out.push(...(await withSavepoint(tx, (sp) => stream.apply(sp, [op]))))
          } catch (e) {
            if (!refusedByPostgres(e)) throw e
            out.push({
              id: op.id,
              reason: e instanceof Error ? e.message : String(e),
              outcome: 'refused',
            })
          }
        }
        await saveStreamCursor(tx, key, page.cursor)
        return out
      })
    }
    for (const s of skipped) {
      log.warn({ stream: stream.name, id: s.id, reason: s.reason }, `bsync operation ${s.outcome}`)
      operationsTotal.inc({ stream: stream.name, outcome: s.outcome })
    }
    const applied = page.operations.length - skipped.length
    operationsTotal.inc({ stream: stream.name, outcome: 'applied' }, applied)
    state.applied += applied
    state.skipped += skipped.length
  }

  #advance(state: StreamState, name: StreamName, cursor: string): void {
    state.cursor = cursor || null
    if (cursor) cursorGauge.set({ stream: name }, Number(cursor))
    for (const w of [...this.#waiters]) w()
  }
}

/** Postgres answered and said no (bad data, a constraint): retrying the same page cannot help. */
function refusedByPostgres(err: unknown): boolean {
  const code = (err as { code?: unknown }).code
  return typeof code === 'string' && /^(22|23|42)/.test(code)
}

async function withSavepoint<T>(tx: Tx, fn: (tx: Tx) => Promise<T>): Promise<T> {
  await sql`savepoint bsync_op`.execute(tx)
  try {
    const out = await fn(tx)
    await sql`release savepoint bsync_op`.execute(tx)
    return out
  } catch (err) {
    await sql`rollback to savepoint bsync_op`.execute(tx)
    throw err
  }
}

/** Waits `ms`, or less if the signal aborts (a stop need not wait out a backoff). */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return wait(ms, undefined, { signal }).catch(() => undefined)
}

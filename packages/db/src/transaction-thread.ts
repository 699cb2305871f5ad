// Transactions run on a thread of their own (transaction-worker.ts), over a connection of their
// own. A writer that plans its next batch while the current one is written would otherwise make
// every reply of the current transaction wait for the planning to yield its thread: a statement
// sent, answered, and the next one sent only when the planning pauses. Here the statements are
// made first (recorded.ts) and sent together; the thread runs them one after another as Postgres
// answers.
//
// One transaction at a time; a second waits for the first. A transaction whose COMMIT was sent
// but not answered is reported as such (`commitSent`), with the rows of its last statement: the
// caller asks Postgres whether it went through.
import { Worker } from 'node:worker_threads'
import type { Statement } from './recorded.ts'

/** What the thread is started with. */
export interface ThreadSetup {
  url: string
  schema: string
}

export interface ThreadRequest {
  id: number
  statements: Statement[]
}

/** A Postgres error's fields that cross the thread. */
export interface TransactionError {
  message: string
  code?: string
  detail?: string
  constraint?: string
  table?: string
  column?: string
  severity?: string
}

export type ThreadReply =
  | { id: number; last: Record<string, unknown>[]; error?: undefined; sent?: undefined }
  /** Every statement answered, COMMIT about to be sent: the rows of the last one. */
  | { id: number; sent: Record<string, unknown>[]; error?: undefined }
  | {
      id: number
      error: TransactionError
      /** Whether COMMIT was sent: it may then have gone through. */
      commitSent: boolean
      last?: Record<string, unknown>[]
      sent?: undefined
    }

/** A transaction that failed; `commitSent`: its COMMIT went unanswered, it may have committed. */
export class TransactionFailed extends Error {
  readonly commitSent: boolean
  /** The rows of its last statement, when every statement was answered. */
  readonly last: Record<string, unknown>[] | undefined
  readonly code: string | undefined

  constructor(e: TransactionError, commitSent: boolean, last?: Record<string, unknown>[]) {
    super(e.message)
    this.name = 'TransactionFailed'
    this.commitSent = commitSent
    this.last = last
    this.code = e.code
    Object.assign(this, e)
  }
}

/** How long closing waits for the thread to end its connection before stopping it. */
const CLOSE_MS = 5_000

export class TransactionThread {
  private readonly setup: ThreadSetup
  private worker: Worker | undefined
  private ready: Promise<void> | undefined
  /** Resolves when the current worker has exited. */
  private exited: Promise<void> = Promise.resolve()
  private readonly waiting = new Map<number, (reply: ThreadReply) => void>()
  /** Per transaction in flight, the rows of its last statement once its COMMIT is to be sent. */
  private readonly sent = new Map<number, Record<string, unknown>[]>()
  private nextId = 0
  private tail: Promise<unknown> = Promise.resolve()
  private closed = false

  constructor(setup: ThreadSetup) {
    this.setup = setup
  }

  /**
   * Runs the statements in one transaction; resolves with the rows of the last one once it has
   * committed. Rejects with TransactionFailed.
   */
  run(statements: Statement[]): Promise<Record<string, unknown>[]> {
    const run = this.tail.then(
      () => this.send(statements),
      () => this.send(statements),
    )
    this.tail = run.catch(() => {})
    return run
  }

  private async send(statements: Statement[]): Promise<Record<string, unknown>[]> {
    if (this.closed) throw new Error('the transaction thread is closed')
    const worker = this.spawnOnce()
    await this.ready
    const id = this.nextId++
    // The process stays up while a transaction is in flight, whatever else it waits on.
    worker.ref()
    const reply = await new Promise<ThreadReply>((resolve) => {
      this.waiting.set(id, resolve)
      worker.postMessage({ id, statements } satisfies ThreadRequest)
    })
    this.sent.delete(id)
    if (!this.waiting.size) worker.unref()
    if (reply.error) throw new TransactionFailed(reply.error, reply.commitSent, reply.last)
    if (reply.sent) throw new Error('a transaction answered before its end')
    return reply.last
  }

  /**
   * Starts the thread now rather than with the first transaction, resolving once its imports
   * have run: for a caller that wants that start-up paid before work comes.
   */
  async started(): Promise<void> {
    if (this.closed) throw new Error('the transaction thread is closed')
    const worker = this.spawnOnce()
    // Awaited, it holds the process up until loaded, as a transaction in flight would.
    worker.ref()
    try {
      await this.ready
    } finally {
      if (!this.waiting.size) worker.unref()
    }
  }

  private spawnOnce(): Worker {
    if (this.worker) return this.worker
    const worker = new Worker(new URL('./transaction-worker.ts', import.meta.url), {
      workerData: this.setup satisfies ThreadSetup,
    })
    let readied!: () => void
    this.ready = new Promise((resolve) => (readied = resolve))
    this.exited = new Promise((resolve) => worker.once('exit', () => resolve()))
    worker.on('message', (msg: ThreadReply | 'ready') => {
      if (msg === 'ready') return readied()
      if (msg.sent) return void this.sent.set(msg.id, msg.sent)
      const answer = this.waiting.get(msg.id)
      this.waiting.delete(msg.id)
      answer?.(msg)
    })
    const lost = (message: string) => {
      if (this.worker === worker) this.worker = undefined
      readied()
      // The connection ended with the thread: a transaction in flight did not commit, unless
      // its COMMIT may have been sent; then the caller asks Postgres.
      for (const [id, answer] of this.waiting) {
        const last = this.sent.get(id)
        answer({ id, error: { message }, commitSent: last !== undefined, ...(last && { last }) })
      }
      this.waiting.clear()
      this.sent.clear()
    }
    worker.on('error', (err) => lost(`transaction thread failed: ${err.message}`))
    worker.on('exit', (code) => lost(`transaction thread exited (${code})`))
    worker.unref()
    this.worker = worker
    return worker
  }

  /** Ends the connection and the thread, after the transaction in flight. */
  async close(): Promise<void> {
    this.closed = true
    await this.tail
    const worker = this.worker
    if (!worker) return
    this.worker = undefined
    // Stopped only once its imports have run: a thread stopped while still loading them can
    // bring the process down.
    await this.ready
    worker.postMessage('close')
    const timer = setTimeout(() => void worker.terminate(), CLOSE_MS)
    await this.exited
    clearTimeout(timer)
  }
}

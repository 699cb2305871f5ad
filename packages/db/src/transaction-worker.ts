// The thread of transaction-thread.ts: runs each transaction it is sent on its own connection,
// statement after statement, so that a reply from Postgres is answered at once, whatever the
// thread that sent the transaction is busy with.
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { parentPort, workerData } from 'node:worker_threads'
import pg from 'pg'
import { from as copyFrom } from 'pg-copy-streams'
import { searchPathSql } from './db.ts'
import type { Statement } from './recorded.ts'
import type {
  ThreadReply,
  ThreadRequest,
  ThreadSetup,
  TransactionError,
} from './transaction-thread.ts'

const setup = workerData as ThreadSetup
const port = parentPort!

/** The connection, kept between transactions; dropped after any failure. */
let client: pg.Client | undefined

async function connect(): Promise<pg.Client> {
  if (client) return client
  const c = new pg.Client({ connectionString: setup.url })
  // A connection lost mid-query fails that query; without a listener it would end the thread.
  c.on('error', () => {})
  try {
    await c.connect()
    await c.query(searchPathSql(setup.schema))
  } catch (err) {
    void c.end().catch(() => {})
    throw err
  }
  client = c
  return c
}

function drop(): void {
  const c = client
  client = undefined
  void c?.end().catch(() => {})
}

async function runOne(c: pg.Client, s: Statement): Promise<Record<string, unknown>[]> {
  if ('data' in s) {
    await pipeline(Readable.from([s.data]), c.query(copyFrom(s.statement)))
    return []
  }
  const { rows } = await c.query<Record<string, unknown>>(s.text, s.values)
  return rows
}

function errorOf(err: unknown): TransactionError {
  const e = err instanceof Error ? (err as Error & Record<string, unknown>) : undefined
  const out: TransactionError = { message: e?.message ?? String(err) }
  for (const key of ['code', 'detail', 'constraint', 'table', 'column', 'severity'] as const) {
    const v = e?.[key]
    if (typeof v === 'string') out[key] = v
  }
  return out
}

async function run(req: ThreadRequest): Promise<ThreadReply> {
  let c: pg.Client
  try {
    c = await connect()
  } catch (err) {
    return { id: req.id, error: errorOf(err), commitSent: false }
  }
  let last: Record<string, unknown>[] = []
  try {
    await c.query('begin')
    for (const s of req.statements) last = await runOne(c, s)
  } catch (err) {
    // Rolled back with the connection: a failed transaction leaves nothing behind.
    drop()
    return { id: req.id, error: errorOf(err), commitSent: false }
  }
  // Known before COMMIT is sent: if this thread died past here, the caller asks Postgres.
  port.postMessage({ id: req.id, sent: last } satisfies ThreadReply)
  try {
    await c.query('commit')
  } catch (err) {
    drop()
    return { id: req.id, error: errorOf(err), commitSent: true, last }
  }
  return { id: req.id, last }
}

port.on('message', (msg: ThreadRequest | 'close') => {
  if (msg === 'close') {
    const c = client
    client = undefined
    void (c ? c.end() : Promise.resolve()).catch(() => {}).finally(() => port.close())
    return
  }
  void run(msg).then((reply) => port.postMessage(reply))
})
port.postMessage('ready')

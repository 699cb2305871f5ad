// The graph's change feed: a Redis Stream of committed follow changes, appended by the process
// that runs the indexer (after each batch commits, in commit order) and read by every other
// server to keep its own in-memory graph current. Each entry names the entry before it (`prev`):
// a reader whose last entry is not the next one's `prev` has missed changes (entries trimmed, a
// write that failed, Redis flushed, a writer that crashed between commit and append) and reloads
// its graph from Postgres. The chain continues across a writer's restart only after a clean
// stop, which appends a marker once everything committed has been appended.
import type { RedisClient } from '@openplane/timelines'
import { childLogger, throttle } from '@openplane/telemetry'
import { feedAppendFailures } from './metrics.ts'

const log = childLogger('graph-feed')

/** One follow change: `+` the edge exists now, `-` it does not; ids as interned. */
export interface GraphOp {
  op: '+' | '-'
  actor: number
  subject: number
  actorDid: string
  subjectDid: string
}

export interface GraphFeedEntry {
  id: string
  prev: string
  ops: GraphOp[]
  /** The writer stopped cleanly here. */
  stop: boolean
  /** Unreadable (not this format): a reader cannot apply it and must reload. */
  malformed: boolean
}

export interface GraphFeedOptions {
  /** The stream's key. */
  key: string
  /** Entries kept (approximately): a reader further behind than this reloads. */
  maxLength?: number
}

const NONE = '0-0'

/** The stream's newest entry, or undefined when it is empty. */
export async function lastEntry(
  client: RedisClient,
  key: string,
): Promise<GraphFeedEntry | undefined> {
  const [raw] = await client.xrevrange(key, '+', '-', 'COUNT', 1)
  return raw ? parseEntry(raw) : undefined
}

/** The writer's side, in the indexer's process. */
export class GraphFeedWriter {
  readonly #client: RedisClient
  readonly #key: string
  readonly #maxLength: number
  /** The entry the next append names as its predecessor. */
  #prev = NONE
  #lost = 0
  readonly #failedLog = throttle(10_000)

  constructor(client: RedisClient, opts: GraphFeedOptions) {
    this.#client = client
    this.#key = opts.key
    this.#maxLength = opts.maxLength ?? 1_000_000
  }

  /**
   * Continues the chain from a clean stop; after anything else (a crash may have lost appends,
   * or the stream is new) starts a new one, which makes every reader reload once.
   */
  async open(): Promise<void> {
    const last = await lastEntry(this.#client, this.#key).catch((err: unknown) => {
      log.warn({ err }, 'graph feed unreadable at start; readers will reload')
      return undefined
    })
    if (last?.stop) {
      this.#prev = last.id
      return
    }
    // A new chain, begun at once with an empty entry: readers that start from here on have
    // loaded everything committed before it and need not reload at the first change.
    this.#prev = `start-${Date.now()}`
    await this.#add([], false)
  }

  /** Appends one committed batch's changes. A failed append breaks the chain (readers reload). */
  async append(ops: readonly GraphOp[]): Promise<void> {
    if (!ops.length) return
    await this.#add(ops, false)
  }

  /** After the last append of a clean stop: the next writer may continue the chain. */
  async close(): Promise<void> {
    await this.#add([], true)
  }

  async #add(ops: readonly GraphOp[], stop: boolean): Promise<void> {
    const body = JSON.stringify(
      ops.map((o) => [o.op, o.actor, o.subject, o.actorDid, o.subjectDid]),
    )
    try {
      const id = await this.#client.xadd(
        this.#key,
        'MAXLEN',
        '~',
        this.#maxLength,
        '*',
        'prev',
        this.#prev,
        'ops',
        body,
        ...(stop ? ['stop', '1'] : []),
      )
      if (id) this.#prev = id
    } catch (err) {
      // Readers cannot be told what they missed: the next entry names no entry they hold.
      this.#prev = `lost-${Date.now()}-${++this.#lost}`
      feedAppendFailures.inc()
      this.#failedLog((suppressed) =>
        log.warn({ err, suppressed }, 'graph feed append failed; readers will reload their graph'),
      )
    }
  }
}

/** A reader's side: entries after a position, waiting for new ones. */
export class GraphFeedReader {
  readonly #client: RedisClient
  readonly #blocking: RedisClient
  readonly #key: string

  /**
   * `blocking` is this reader's own connection, with a command timeout above the wait: it sits
   * in XREAD BLOCK, and `head()` must not queue behind it on the same connection.
   */
  constructor(client: RedisClient, blocking: RedisClient, opts: GraphFeedOptions) {
    this.#client = client
    this.#blocking = blocking
    this.#key = opts.key
  }

  /** The newest entry's id, or '0-0' for an empty stream. */
  async head(): Promise<string> {
    return (await lastEntry(this.#client, this.#key))?.id ?? NONE
  }

  /** Entries after `after`, waiting up to `blockMs` when there are none yet. */
  async read(after: string, blockMs: number, count = 1000): Promise<GraphFeedEntry[]> {
    const res = await this.#blocking.xread(
      'COUNT',
      count,
      'BLOCK',
      blockMs,
      'STREAMS',
      this.#key,
      after,
    )
    return (res?.[0]?.[1] ?? []).map(parseEntry)
  }

  disconnect(): void {
    this.#blocking.disconnect()
    this.#client.disconnect()
  }
}

function parseEntry([id, fields]: [string, string[]]): GraphFeedEntry {
  const get = (name: string) => {
    for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === name) return fields[i + 1]
    return undefined
  }
  const ops: GraphOp[] = []
  let malformed = false
  try {
    for (const raw of JSON.parse(get('ops') ?? '[]') as unknown[]) {
      const op = parseOp(raw)
      if (op) ops.push(op)
      else malformed = true
    }
  } catch {
    malformed = true
  }
  return { id, prev: get('prev') ?? '', ops, stop: get('stop') === '1', malformed }
}

function parseOp(raw: unknown): GraphOp | undefined {
  if (!Array.isArray(raw) || raw.length !== 5) return undefined
  const [op, actor, subject, actorDid, subjectDid] = raw as unknown[]
  if ((op !== '+' && op !== '-') || typeof actorDid !== 'string' || typeof subjectDid !== 'string')
    return undefined
  if (!isId(actor) || !isId(subject)) return undefined
  return { op, actor, subject, actorDid, subjectDid }
}

const isId = (x: unknown): x is number => Number.isInteger(x) && (x as number) > 0

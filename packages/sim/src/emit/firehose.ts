// A local com.atproto.sync.subscribeRepos endpoint on @atproto/xrpc-server's streaming server:
// frames are sequenced in order, kept in a bounded in-memory backlog for cursor replay, and
// encoded once however many consumers read them. The same HTTP server answers
// /.well-known/atproto-did by Host header, as a PDS hosting the simulated handles would.
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type Server as HttpServer,
  type ServerResponse,
} from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Duplex } from 'node:stream'
import type { LexiconDoc } from '@atproto/lexicon'
import {
  createServer,
  extractUrlNsid,
  InvalidRequestError,
  MessageFrame,
} from '@atproto/xrpc-server'
import { carFile, CborWriter, messageFrame } from './cbor.ts'
import type { SignedCommit } from './repos.ts'

export const SUBSCRIBE_REPOS = 'com.atproto.sync.subscribeRepos'

const cidLink = { type: 'cid-link' } as const

/** The subscribeRepos lexicon, restricted to the messages this endpoint sends. */
const subscribeReposLexicon: LexiconDoc = {
  lexicon: 1,
  id: SUBSCRIBE_REPOS,
  defs: {
    main: {
      type: 'subscription',
      parameters: { type: 'params', properties: { cursor: { type: 'integer' } } },
      message: { schema: { type: 'union', refs: ['#commit', '#identity', '#account', '#info'] } },
      errors: [{ name: 'FutureCursor' }, { name: 'ConsumerTooSlow' }],
    },
    commit: {
      type: 'object',
      required: ['seq', 'rebase', 'tooBig', 'repo', 'commit', 'rev', 'since', 'blocks', 'ops'],
      nullable: ['since'],
      properties: {
        seq: { type: 'integer' },
        rebase: { type: 'boolean' },
        tooBig: { type: 'boolean' },
        repo: { type: 'string', format: 'did' },
        commit: cidLink,
        rev: { type: 'string', format: 'tid' },
        since: { type: 'string', format: 'tid' },
        blocks: { type: 'bytes', maxLength: 2_000_000 },
        ops: { type: 'array', items: { type: 'ref', ref: '#repoOp' }, maxLength: 200 },
        blobs: { type: 'array', items: cidLink },
        prevData: cidLink,
        time: { type: 'string', format: 'datetime' },
      },
    },
    identity: {
      type: 'object',
      required: ['seq', 'did', 'time'],
      properties: {
        seq: { type: 'integer' },
        did: { type: 'string', format: 'did' },
        time: { type: 'string', format: 'datetime' },
        handle: { type: 'string', format: 'handle' },
      },
    },
    account: {
      type: 'object',
      required: ['seq', 'did', 'time', 'active'],
      properties: {
        seq: { type: 'integer' },
        did: { type: 'string', format: 'did' },
        time: { type: 'string', format: 'datetime' },
        active: { type: 'boolean' },
      },
    },
    info: {
      type: 'object',
      required: ['name'],
      properties: {
        name: { type: 'string', knownValues: ['OutdatedCursor'] },
        message: { type: 'string' },
      },
    },
    repoOp: {
      type: 'object',
      required: ['action', 'path', 'cid'],
      nullable: ['cid'],
      properties: {
        action: { type: 'string', knownValues: ['create', 'update', 'delete'] },
        path: { type: 'string' },
        cid: cidLink,
        prev: cidLink,
      },
    },
  },
}

/** A message frame whose bytes were encoded once, when it was sequenced. */
class EncodedFrame extends MessageFrame<{ seq: number }> {
  private readonly bytes: Uint8Array

  constructor(type: string, seq: number, bytes: Uint8Array) {
    super({ seq }, { type })
    this.bytes = bytes
  }

  override toBytes(): Uint8Array {
    return this.bytes
  }
}

/**
 * The #commit frame of a signed commit: header, body (its ops with their prev CIDs), CAR of the
 * commit + its blocks. Map keys are written in DAG-CBOR order (shorter first, then bytewise).
 */
export function commitFrame(w: CborWriter, seq: number, time: string, c: SignedCommit): Buffer {
  const car = carFile(w, c.commit, [{ cid: c.commit, bytes: c.commitBytes }, ...c.blocks])
  const header = w.map(2).text('t').text('#commit').text('op').uint(1).finish()
  w.map(c.prevData === null ? 11 : 12)
  w.text('ops').array(c.ops.length)
  for (const op of c.ops) {
    // A create has no prev: the lexicon's prev is optional, not nullable, so it is left out.
    w.map(op.prev === null ? 3 : 4)
    w.text('cid').cidOrNull(op.cid)
    w.text('path').text(op.path)
    if (op.prev !== null) w.text('prev').cid(op.prev)
    w.text('action').text(op.action)
  }
  w.text('rev').text(c.rev)
  w.text('seq').uint(seq)
  w.text('repo').text(c.did)
  w.text('time').text(time)
  w.text('blobs').array(0)
  w.text('since')
  if (c.since === null) w.null()
  else w.text(c.since)
  w.text('blocks').bytes(car)
  w.text('commit').cid(c.commit)
  w.text('rebase').bool(false)
  w.text('tooBig').bool(false)
  if (c.prevData !== null) w.text('prevData').cid(c.prevData)
  return Buffer.concat([header, w.finish()])
}

export function identityFrame(seq: number, time: string, did: string, handle: string): Uint8Array {
  return messageFrame(new CborWriter(), '#identity', { seq, did, time, handle })
}

export function accountFrame(seq: number, time: string, did: string): Uint8Array {
  return messageFrame(new CborWriter(), '#account', { seq, did, time, active: true })
}

export interface FirehoseOptions {
  host: string
  port: number
  /** Frames kept for replay: older cursors get #info OutdatedCursor and start at the oldest. */
  backlog: number
  /** The DID a handle belongs to, for /.well-known/atproto-did; undefined answers 404. */
  didForHandle: (handle: string) => string | undefined
  /** Seq of the first frame. */
  firstSeq: number
}

export type FrameType = '#commit' | '#identity' | '#account'

export class LocalFirehose {
  readonly host: string
  private readonly http: HttpServer
  private readonly xrpc: ReturnType<typeof createServer>
  private readonly ring: (EncodedFrame | null)[]
  /** Last seq handed out, and last published (every seq up to it is readable). */
  private reserved: number
  private published: number
  private readonly firstSeq: number
  /** Frames ready but waiting for an earlier seq, with who waits for each to be published. */
  private readonly pending = new Map<number, { frame: EncodedFrame | null; done: () => void }>()
  private wakers: (() => void)[] = []
  private closed = false

  private constructor(
    opts: FirehoseOptions,
    http: HttpServer,
    xrpc: ReturnType<typeof createServer>,
  ) {
    this.host = opts.host
    this.http = http
    this.xrpc = xrpc
    this.ring = new Array<EncodedFrame | null>(Math.max(1, opts.backlog)).fill(null)
    this.firstSeq = opts.firstSeq
    this.reserved = this.published = opts.firstSeq - 1
  }

  static async start(opts: FirehoseOptions): Promise<LocalFirehose> {
    const xrpc = createServer([subscribeReposLexicon], { validateResponse: false })
    const http = createHttpServer(xrpc.router)
    const self = new LocalFirehose(opts, http, xrpc)
    xrpc.streamMethod(SUBSCRIBE_REPOS, {
      handler: ({ params, signal }) => self.stream(params.cursor as number | undefined, signal),
    })
    xrpc.routes.get('/.well-known/atproto-did', (req: IncomingMessage, res: ServerResponse) => {
      const handle = (req.headers.host ?? '').replace(/:\d+$/, '').toLowerCase()
      const did = opts.didForHandle(handle)
      res.writeHead(did ? 200 : 404, { 'content-type': 'text/plain' })
      res.end(did ?? 'no user by that handle')
    })
    xrpc.routes.get('/xrpc/_health', (_req: IncomingMessage, res: ServerResponse) => {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ version: 'openplane-sim' }))
    })
    // The stream server's WebSockets take over upgrade requests for the subscription's path.
    http.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      const sub = xrpc.subscriptions.get(extractUrlNsid(req.url ?? '') ?? '')
      if (!sub) {
        socket.destroy()
        return
      }
      sub.wss.handleUpgrade(req, socket, head, (ws) => sub.wss.emit('connection', ws, req))
    })
    await new Promise<void>((resolve, reject) => {
      http.once('error', reject)
      http.listen(opts.port, opts.host, () => resolve())
    })
    return self
  }

  get port(): number {
    return (this.http.address() as AddressInfo).port
  }

  get url(): string {
    return `ws://${this.host}:${this.port}`
  }

  get httpUrl(): string {
    return `http://${this.host}:${this.port}`
  }

  /** Seq of the newest published frame (firstSeq - 1 before any). */
  get head(): number {
    return this.published
  }

  /** Oldest seq still in the backlog. */
  get oldest(): number {
    return Math.max(this.firstSeq, this.published - this.ring.length + 1)
  }

  /** Hands out the next seq; `fill` it (or skip it) for the stream to move past it. */
  reserve(): number {
    if (this.closed) throw new Error('firehose is closed')
    return ++this.reserved
  }

  /**
   * Publishes the frame of a reserved seq (null leaves a gap) once every earlier seq is; the
   * promise resolves when it is published.
   */
  fill(seq: number, type: FrameType, bytes: Uint8Array | null): Promise<void> {
    const frame = bytes && new EncodedFrame(type, seq, bytes)
    if (seq !== this.published + 1) {
      return new Promise((done) => this.pending.set(seq, { frame, done }))
    }
    this.publish(frame)
    for (let next = this.pending.get(this.published + 1); next;) {
      this.pending.delete(this.published + 1)
      this.publish(next.frame)
      next.done()
      next = this.pending.get(this.published + 1)
    }
    const wakers = this.wakers
    this.wakers = []
    for (const wake of wakers) wake()
    return Promise.resolve()
  }

  private publish(frame: EncodedFrame | null): void {
    this.published++
    this.ring[this.published % this.ring.length] = frame
  }

  /** One consumer's stream: the backlog after its cursor, then live frames. */
  private async *stream(cursor: number | undefined, signal: AbortSignal) {
    let next = this.published + 1
    if (cursor !== undefined) {
      if (cursor > this.published) {
        throw new InvalidRequestError('Cursor in the future.', 'FutureCursor')
      }
      next = cursor + 1
      if (next < this.oldest) {
        yield new MessageFrame(
          {
            name: 'OutdatedCursor',
            message: `Cursor ${cursor} is older than the backlog; replaying from ${this.oldest}`,
          },
          { type: '#info' },
        )
        next = this.oldest
      }
    }
    let wake: (() => void) | undefined
    const onAbort = () => wake?.()
    signal.addEventListener('abort', onAbort, { once: true })
    try {
      while (!signal.aborted && !this.closed) {
        while (next <= this.published) {
          if (next < this.oldest) {
            throw new InvalidRequestError('Stream consumer too slow', 'ConsumerTooSlow')
          }
          const frame = this.ring[next % this.ring.length]
          next++
          if (frame) yield frame
          if (signal.aborted) return
        }
        await new Promise<void>((resolve) => {
          wake = resolve
          this.wakers.push(resolve)
        })
      }
    } finally {
      signal.removeEventListener('abort', onAbort)
    }
  }

  async close(): Promise<void> {
    this.closed = true
    const wakers = this.wakers
    this.wakers = []
    for (const wake of wakers) wake()
    for (const sub of this.xrpc.subscriptions.values()) {
      for (const ws of sub.wss.clients) ws.terminate()
      sub.wss.close()
    }
    await new Promise<void>((resolve) => {
      this.http.close(() => resolve())
      this.http.closeAllConnections()
    })
  }
}

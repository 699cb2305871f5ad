// Serves a recorded corpus as com.atproto.sync.subscribeRepos, to any number of consumers, each
// from its own cursor: at a fixed rate (the stream's head advances in real time, as a relay's
// does) or as fast as each consumer reads. The file already holds every frame as WebSocket
// bytes, so a consumer's stream is file ranges written to its socket: nothing is decoded or
// encoded per consumer. The same port answers what indexers ask about the corpus's users: PLC
// documents, /.well-known/atproto-did by Host header, and repo status. It also serves the same
// stream as Jetstream does (`/subscribe`, JSON, optionally zstd-compressed: jetstream.ts), built
// per consumer from the frames. Each consumer's socket is consumer.ts; the rest stays one class,
// at about 400 lines, because every endpoint reads the same corpus, pace and consumers.
import { createHash } from 'node:crypto'
import http, { type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import { decode, decodeFirst, encode } from '@atcute/cbor'
import { SimKeys } from '../emit/keys.ts'
import { PlcDocuments } from '../emit/plc.ts'
import { didFor, idForHandle } from '../ids.ts'
import { compressMessage } from '@openplane/jetstream'
import { Consumer, type JetstreamWants } from './consumer.ts'
import { wsBinaryFrame, wsFrame, type CorpusReader } from './file.ts'
import { JetstreamView, wantedBy } from './jetstream.ts'
import type { CorpusRepos } from './repos.ts'

/** The earliest TID: a `since` no commit follows. */
const NO_SUCH_REV = '2222222222222'

/** A firehose message whose commit names a `since` it does not follow (others as they are). */
function breakChain(message: Buffer): Uint8Array {
  const [header, rest] = decodeFirst(message) as [{ t?: string }, Uint8Array]
  const body = decode(rest) as Record<string, unknown>
  if (header.t !== '#commit' || body.since == null) return message
  return Buffer.concat([encode(header), encode({ ...body, since: NO_SUCH_REV })])
}

export interface ReplayOptions {
  corpus: CorpusReader
  host?: string
  port?: number
  /**
   * Events per second the stream's head advances at; undefined: the whole corpus is available
   * at once and each consumer reads as fast as it can.
   */
  rate?: number
  /** Frames already "in the past" when the server starts (a consumer starting at 0 is behind). */
  headStart?: number
  /** Whole repos to serve by listRepos and getRepo (CorpusRepos.load). */
  repos?: CorpusRepos
  /**
   * Frames behind the head kept for replay (undefined: all). An older firehose cursor gets
   * #info OutdatedCursor and the stream from the oldest frame kept, as a relay answers a cursor
   * past its window; an older Jetstream cursor gets that stream without a word, as Jetstream does.
   */
  window?: number
  /**
   * A faulty upstream, as an operator may meet one: every commit after a repo's first names a
   * `since` that is not the repo's previous rev (to a consumer checking chains, a broken chain,
   * so it asks for the repo again), and getRepo answers 400 RepoNotFound for every repo (the
   * refetch fails). The records are all there: a consumer that applies what it gets loses none.
   */
  brokenChains?: boolean
}

export interface ReplayStatus {
  /** Frames available now, and the seq / event time of the newest. */
  head: number
  head_seq: number
  head_time: string | null
  frames: number
  /** Whole repos served (null: not loaded, or not asked for). */
  repos: { users: number; served: number } | null
  consumers: {
    cursor: number
    sent: number
    bytes: number
    kind: 'firehose' | 'jetstream' | 'jetstream+zstd'
  }[]
}

/** Frames converted to Jetstream messages per round. */
const JETSTREAM_FRAMES = 512

const WS_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11'
/** Bytes written to a socket per write: big enough to amortise, small enough to interleave. */
const CHUNK_BYTES = 1 << 20
const CHUNK_FRAMES = 4096

export class ReplayServer {
  private readonly opts: ReplayOptions
  private readonly corpus: CorpusReader
  private readonly server: http.Server
  private readonly docs: PlcDocuments
  private readonly consumers = new Set<Consumer>()
  private readonly domain: string
  private startedAt = 0
  /** Events per second the head advances at (see ReplayOptions.rate); setRate changes it. */
  private rate: number | undefined
  /** Frames released when the current rate began. */
  private released: number
  private closed = false
  private repos: CorpusRepos | undefined
  private readonly jetstream: JetstreamView
  /** Frames behind the head kept for replay (undefined: all); may be changed while serving. */
  window: number | undefined

  private constructor(opts: ReplayOptions) {
    this.opts = opts
    this.rate = opts.rate
    this.released = opts.headStart ?? 0
    this.window = opts.window
    this.corpus = opts.corpus
    this.repos = opts.repos
    this.jetstream = new JetstreamView(opts.corpus)
    this.domain = opts.corpus.header.handle_domain
    this.server = http.createServer((req, res) => this.request(req, res))
    this.server.keepAliveTimeout = 60_000
    this.server.on('upgrade', (req: IncomingMessage, socket: Socket) => this.upgrade(req, socket))
    // The PDS URL is set once the port is known: documents name this server as the users' PDS.
    this.docs = new PlcDocuments({
      keys: new SimKeys({ seed: opts.corpus.header.seed }),
      handleDomain: this.domain,
      users: opts.corpus.header.users,
      pdsUrl: '',
      publicKeys: new Map(
        Object.entries(opts.corpus.summary.public_keys ?? {}).map(([id, key]) => [Number(id), key]),
      ),
    })
  }

  static async start(opts: ReplayOptions): Promise<ReplayServer> {
    const self = new ReplayServer(opts)
    await new Promise<void>((resolve, reject) => {
      self.server.once('error', reject)
      self.server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => resolve())
    })
    self.docs.pdsUrl = self.httpUrl
    self.startedAt = performance.now()
    return self
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port
  }

  get httpUrl(): string {
    return `http://${this.opts.host ?? '127.0.0.1'}:${this.port}`
  }

  /** ws:// base URL (consumers append /xrpc/com.atproto.sync.subscribeRepos). */
  get url(): string {
    return this.httpUrl.replace(/^http/, 'ws')
  }

  /** Frames available now: all of them, or as many as the rate has released so far. */
  head(): number {
    const total = this.corpus.frames
    if (this.rate === undefined) return total
    const elapsed = (performance.now() - this.startedAt) / 1000
    return Math.min(total, this.released + Math.floor(elapsed * this.rate))
  }

  /** From now on the head advances at `rate` events per second; what was released stays. */
  setRate(rate: number): void {
    this.released = this.head()
    this.startedAt = performance.now()
    this.rate = rate
  }

  status(): ReplayStatus {
    const head = this.head()
    return {
      head,
      head_seq: head ? this.corpus.seqAt(head - 1) : 0,
      head_time: head ? new Date(this.corpus.timeAt(head - 1)).toISOString() : null,
      frames: this.corpus.frames,
      repos: this.repos ? { users: this.repos.ids().length, served: this.served.repos } : null,
      consumers: [...this.consumers].map((c) => ({
        cursor: c.next ? this.corpus.seqAt(c.next - 1) : 0,
        sent: c.sent,
        bytes: c.bytes,
        kind: !c.jetstream ? 'firehose' : c.jetstream.compress ? 'jetstream+zstd' : 'jetstream',
      })),
    }
  }

  private request(req: IncomingMessage, res: ServerResponse): void {
    const send = (status: number, body: unknown, type = 'application/json') => {
      res.writeHead(status, { 'content-type': type })
      res.end(typeof body === 'string' ? body : JSON.stringify(body))
    }
    const url = new URL(req.url ?? '/', 'http://replay')
    const path = url.pathname
    if (path === '/_health' || path === '/_replay') return send(200, this.status())
    if (path === '/_replay/drop' && req.method === 'POST') {
      return send(200, { dropped: this.dropConsumers() })
    }
    if (path === '/.well-known/atproto-did') {
      const host = (req.headers.host ?? '').toLowerCase().replace(/:\d+$/, '')
      const id = idForHandle(host, this.domain, this.corpus.header.users)
      if (id === undefined) return send(404, 'handle not found', 'text/plain')
      return send(200, didFor(id), 'text/plain')
    }
    if (
      path === '/xrpc/com.atproto.sync.getLatestCommit' ||
      path === '/xrpc/com.atproto.sync.getRepoStatus'
    ) {
      // Every user of the corpus keeps its repo (accounts are only deactivated, never deleted).
      const did = url.searchParams.get('did') ?? ''
      if (this.docs.idOf(did) === undefined) {
        return send(400, { error: 'RepoNotFound', message: `Could not find repo for DID: ${did}` })
      }
      if (path.endsWith('getRepoStatus')) return send(200, { did, active: true })
      return send(200, {
        cid: 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm',
        rev: '3l3qo2vutsw2b',
      })
    }
    if (path === '/xrpc/com.atproto.sync.getRepo' && this.opts.brokenChains) {
      const did = url.searchParams.get('did') ?? ''
      return send(400, { error: 'RepoNotFound', message: `Could not find repo for DID: ${did}` })
    }
    if (path === '/xrpc/com.atproto.sync.listRepos' || path === '/xrpc/com.atproto.sync.getRepo') {
      void this.repoRequest(path, url, res, send)
      return
    }
    const answer = this.docs.answer(path)
    if (answer) return send(answer.status, answer.body, answer.type)
    send(404, { error: 'NotFound', message: `no route ${path}` })
  }

  /** listRepos (paged by user id) and getRepo (a whole repo's CAR), when repos are loaded. */
  private async repoRequest(
    path: string,
    url: URL,
    res: ServerResponse,
    send: (status: number, body: unknown, type?: string) => void,
  ): Promise<void> {
    const repos = this.repos
    if (!repos) return send(503, { error: 'NotReady', message: 'repos are not loaded (yet)' })
    if (path.endsWith('listRepos')) {
      const limit = Math.min(1000, Math.max(1, Number(url.searchParams.get('limit') ?? 500) || 500))
      const after = Number(url.searchParams.get('cursor') ?? 0) || 0
      const ids = repos.ids()
      let i = 0
      while (i < ids.length && ids[i]! <= after) i++
      const page = ids.slice(i, i + limit)
      const last = page[page.length - 1]
      return send(200, {
        repos: page.map((id) => ({ ...repos.entry(id)!, head: undefined })),
        cursor: page.length === limit && last !== undefined ? String(last) : undefined,
      })
    }
    const did = url.searchParams.get('did') ?? ''
    try {
      const car = await repos.car(did)
      if (!car) {
        return send(400, { error: 'RepoNotFound', message: `Could not find repo for DID: ${did}` })
      }
      res.writeHead(200, { 'content-type': 'application/vnd.ipld.car' })
      res.end(car)
      this.served.bytes += car.length
      this.served.repos++
    } catch (err) {
      send(500, { error: 'InternalServerError', message: String(err) })
    }
  }

  /** Repos served by getRepo, and their bytes. */
  readonly served = { repos: 0, bytes: 0 }

  /**
   * Cuts every consumer's connection at once, as a relay restart or a network fault would, and
   * returns how many there were. Consumers reconnect from their own cursors; the head keeps
   * advancing meanwhile.
   */
  dropConsumers(): number {
    const n = this.consumers.size
    for (const c of this.consumers) c.socket.destroy()
    return n
  }

  /** Starts serving whole repos (loading them takes a while: the server answers meanwhile). */
  serveRepos(repos: CorpusRepos): void {
    this.repos = repos
  }

  private upgrade(req: IncomingMessage, socket: Socket): void {
    const url = new URL(req.url ?? '/', 'http://replay')
    const key = req.headers['sec-websocket-key']
    const jetstream = url.pathname === '/subscribe'
    if (
      this.closed ||
      (url.pathname !== '/xrpc/com.atproto.sync.subscribeRepos' && !jetstream) ||
      typeof key !== 'string' ||
      (req.headers.upgrade ?? '').toLowerCase() !== 'websocket'
    ) {
      socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n')
      return
    }
    const accept = createHash('sha1')
      .update(key + WS_GUID)
      .digest('base64')
    socket.write(
      'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
        `Sec-WebSocket-Accept: ${accept}\r\n\r\n`,
    )
    socket.setNoDelay(true)
    const raw = url.searchParams.get('cursor')
    const cursor = raw === null || raw === '' ? undefined : Number(raw)
    const consumer = new Consumer(socket)
    if (jetstream) {
      consumer.jetstream = {
        compress: url.searchParams.get('compress') === 'true',
        collections: url.searchParams.getAll('wantedCollections').flatMap((c) => c.split(',')),
      }
    }
    this.consumers.add(consumer)
    socket.on('close', () => {
      consumer.closed = true
      this.consumers.delete(consumer)
    })
    if (cursor !== undefined && (!Number.isSafeInteger(cursor) || cursor < 0)) {
      consumer.fail('InvalidRequest', `bad cursor: ${raw}`)
      return
    }
    const head = this.head()
    const oldest = this.window === undefined ? 0 : Math.max(0, head - this.window)
    if (consumer.jetstream) {
      // Jetstream resumes at the first event at or after the cursor; one in the future (or
      // none) starts at the live tip.
      const from = cursor === undefined ? head : this.jetstream.indexFrom(cursor)
      consumer.next = Math.max(oldest, Math.min(from, head))
      void this.pump(consumer)
      return
    }
    const headSeq = head ? this.corpus.seqAt(head - 1) : 0
    if (cursor !== undefined && cursor > headSeq) {
      consumer.fail('FutureCursor', 'Cursor in the future.')
      return
    }
    // Without a cursor, the live head, as a relay does: at full speed the whole corpus is out
    // already, so such a consumer (a head probe) waits for nothing; readers pass cursor 0.
    consumer.next = cursor !== undefined ? this.corpus.after(cursor) : head
    if (consumer.next < oldest) {
      consumer.info('OutdatedCursor', `cursor ${cursor} is older than the window kept`)
      consumer.next = oldest
    }
    void this.pump(consumer)
  }

  private async pump(c: Consumer): Promise<void> {
    try {
      while (!c.closed && !this.closed) {
        const head = this.head()
        if (c.next >= head) {
          // Caught up: wait for the rate to release more (or forever, at the corpus's end).
          const wait = this.rate && head < this.corpus.frames ? Math.max(1, 1000 / this.rate) : 250
          await new Promise((r) => setTimeout(r, Math.min(50, wait)))
          continue
        }
        if (c.jetstream) {
          await this.sendJetstream(c, c.jetstream, Math.min(head, c.next + JETSTREAM_FRAMES))
          continue
        }
        if (this.opts.brokenChains) {
          await this.sendBrokenChains(c, Math.min(head, c.next + CHUNK_FRAMES))
          continue
        }
        let end = Math.min(head, c.next + CHUNK_FRAMES)
        const start = this.corpus.offsetAt(c.next)
        while (end > c.next + 1 && this.corpus.offsetAt(end) - start > CHUNK_BYTES) {
          end = c.next + Math.max(1, (end - c.next) >> 1)
        }
        const bytes = await this.corpus.read(c.next, end)
        c.sent += end - c.next
        c.bytes += bytes.length
        c.next = end
        if (!c.socket.write(bytes)) await c.drained()
      }
    } catch (err) {
      if (!c.closed) c.socket.destroy(err as Error)
    }
  }

  /** Frames [c.next, end) with every chained commit's `since` broken, each re-encoded. */
  private async sendBrokenChains(c: Consumer, end: number): Promise<void> {
    const parts: Buffer[] = []
    for await (const { bytes } of this.corpus.messages(c.next, end)) {
      parts.push(wsBinaryFrame(breakChain(bytes)))
    }
    const out = Buffer.concat(parts)
    c.sent += end - c.next
    c.bytes += out.length
    c.next = end
    if (!c.socket.write(out)) await c.drained()
  }

  /** Frames [c.next, end) as Jetstream messages, filtered and framed as the consumer asked. */
  private async sendJetstream(c: Consumer, wants: JetstreamWants, end: number): Promise<void> {
    const parts: Buffer[] = []
    let i = c.next
    for await (const { bytes } of this.corpus.messages(c.next, end)) {
      for (const m of await this.jetstream.messages(i, bytes)) {
        if (m.kind === 'commit' && !wantedBy(wants.collections, m.commit.collection)) continue
        const json = JSON.stringify(m)
        parts.push(
          wants.compress ? wsFrame(compressMessage(json), 0x2) : wsFrame(Buffer.from(json), 0x1),
        )
      }
      i++
    }
    const out = Buffer.concat(parts)
    c.sent += end - c.next
    c.bytes += out.length
    c.next = end
    if (out.length && !c.socket.write(out)) await c.drained()
  }

  async close(): Promise<void> {
    this.closed = true
    for (const c of this.consumers) c.socket.destroy()
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve())
      this.server.closeAllConnections()
    })
  }
}

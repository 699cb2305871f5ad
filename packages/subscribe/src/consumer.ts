// One consumer's connection: it reads on from its own cursor at its own pace — from the tail held
// in memory once it has caught up, from Postgres pages while it is further back — so it never
// holds up another consumer or the indexer. Nothing is queued on its behalf beyond a bounded
// socket buffer: while that is full it is not written to, and a consumer that reads nothing for
// too long, or falls behind the retained window, is closed with the reason (server.ts).
import type { Duplex } from 'node:stream'
import { childLogger } from '@openplane/telemetry'
import { FilterError, filterFromMessage, type Filter } from './filter.ts'
import type { ReplayPages } from './replay-pages.ts'
import type { Chunk, PublishedTail } from './tail.ts'
import {
  CLOSE,
  closeFrame,
  frame,
  FrameReader,
  OPCODE,
  ProtocolError,
  type ClientMessage,
} from './websocket.ts'

const log = childLogger('subscribe')

/** Unsent bytes past which a consumer is not written to until its socket drains. */
const HIGH_WATER = 256 * 1024
/** Bytes of messages per write, about. */
const CHUNK_BYTES = 128 * 1024
/** A consumer's own messages: an options update is small. */
const MAX_CLIENT_MESSAGE = 10_000_000
/** After a close frame, how long the peer has to finish before the socket is destroyed. */
const CLOSE_GRACE_MS = 5000

export interface ConsumerHost {
  tail: PublishedTail
  /** Pages of the log for consumers further back than the tail, shared between them. */
  pages: ReplayPages
  sent(messages: number, bytes: number): void
  closed(consumer: Consumer, reason: string): void
}

export interface ConsumerOptions {
  filter: Filter
  compress: boolean
  /** Messages after this cursor are sent (moved up to where the log's trims have reached). */
  pos: number
  /** Send nothing until the first options_update (`requireHello=true`). */
  requireHello: boolean
}

export class Consumer {
  private readonly socket: Duplex
  private readonly host: ConsumerHost
  private readonly reader = new FrameReader(MAX_CLIENT_MESSAGE)
  private filter: Filter
  private readonly compress: boolean
  private pos: number
  private waiting: boolean
  private running = false
  private again = false
  private isClosed = false
  /**
   * Until the first read: a start cursor older than the log is moved up to its oldest message
   * (Jetstream's clamp); later, a consumer left behind by a trim has lost messages.
   */
  private atStart = true
  /** Since when the socket has been too full to write to (undefined: it is not). */
  private blockedSince: number | undefined

  constructor(socket: Duplex, host: ConsumerHost, opts: ConsumerOptions) {
    this.socket = socket
    this.host = host
    this.filter = opts.filter
    this.compress = opts.compress
    this.pos = opts.pos
    this.waiting = opts.requireHello
    socket.on('data', (chunk: Buffer) => this.received(chunk))
    socket.on('drain', () => this.pump())
    socket.on('error', (err) => {
      log.debug({ err }, 'consumer socket failed')
      this.close(CLOSE.goingAway, 'socket error')
    })
    socket.on('close', () => this.close(CLOSE.goingAway, 'connection closed by the consumer'))
  }

  /** Milliseconds the consumer has read nothing while messages waited for it. */
  stalledFor(now: number): number {
    return this.blockedSince === undefined ? 0 : now - this.blockedSince
  }

  /** Sends what is there to send, until caught up or the socket is full. */
  pump(): void {
    if (this.isClosed || this.waiting) return
    if (this.running) {
      this.again = true
      return
    }
    this.running = true
    this.run()
      .catch((err: unknown) => {
        log.warn({ err }, 'consumer stopped')
        this.close(CLOSE.internal, 'internal error')
      })
      .finally(() => {
        this.running = false
        if (this.again) {
          this.again = false
          this.pump()
        }
      })
  }

  /** Closes with a close frame and the reason; the socket goes once it is sent (or after a grace). */
  close(code: number, reason: string): void {
    if (this.isClosed) return
    this.isClosed = true
    this.host.closed(this, reason)
    if (!this.socket.destroyed) {
      this.socket.end(closeFrame(code, reason))
      setTimeout(() => this.socket.destroy(), CLOSE_GRACE_MS).unref()
    }
  }

  private async run(): Promise<void> {
    const { tail } = this.host
    while (!this.isClosed && !this.waiting) {
      if (this.socket.writableLength >= HIGH_WATER) {
        this.blockedSince ??= Date.now()
        return
      }
      this.blockedSince = undefined
      if (this.pos >= tail.head) return
      if (tail.covers(this.pos)) {
        this.atStart = false
        this.send(tail.chunk(this.pos, this.filter, this.compress, CHUNK_BYTES))
        continue
      }
      const from = this.pos
      const page = await this.host.pages.get(from)
      if (this.isClosed) return
      // A trim that took messages after `from` before the page was read (page.trimmed): at the
      // start that is Jetstream's clamp to the oldest message; later, a loss.
      if (!this.atStart && from < page.trimmed) {
        this.close(CLOSE.policy, 'consumer too slow: fell behind the retained window')
        return
      }
      this.atStart = false
      if (!page.entries.length) {
        // Nothing stored after it: what it lacked was trimmed; memory has the rest.
        this.pos = Math.max(this.pos, tail.floor)
        continue
      }
      const chunk = page.chunk(this.filter, this.compress)
      if (chunk) this.send(chunk)
    }
  }

  private send(chunk: Chunk): void {
    this.pos = chunk.last
    if (!chunk.data) return
    this.socket.write(chunk.data)
    this.host.sent(chunk.messages, chunk.data.length)
  }

  private received(bytes: Buffer): void {
    let messages: ClientMessage[]
    try {
      messages = this.reader.push(bytes)
    } catch (err) {
      if (err instanceof ProtocolError) this.close(err.code, err.message)
      else this.close(CLOSE.protocolError, 'unreadable frame')
      return
    }
    for (const m of messages) {
      if (this.isClosed) return
      switch (m.type) {
        case 'ping':
          this.socket.write(frame(OPCODE.pong, m.data))
          break
        case 'pong':
          break
        case 'close':
          this.close(CLOSE.normal, 'closed by the consumer')
          return
        case 'text':
        case 'binary':
          this.update(m.data.toString('utf8'))
          break
      }
    }
  }

  /** An options_update replaces the filter from the next message on. */
  private update(text: string): void {
    let filter: Filter | undefined
    try {
      filter = filterFromMessage(text)
    } catch (err) {
      const why = err instanceof FilterError ? err.message : 'unreadable message'
      this.close(CLOSE.policy, `invalid options_update: ${why}`)
      return
    }
    if (!filter) return
    this.filter = filter
    this.waiting = false
    this.pump()
  }
}

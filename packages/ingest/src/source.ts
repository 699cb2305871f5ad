// A subscribeRepos connection that reconnects with backoff from the latest cursor and pauses the
// socket while the consumer is behind, so a fast relay cannot grow our memory without bound.
import WebSocket from 'ws'
import { childLogger } from '@openplane/telemetry'

const log = childLogger('firehose')

export interface SourceOptions {
  url: string
  /** The seq to resume after (undefined: from the relay's live tip). */
  cursor: () => number | undefined
  onFrame: (bytes: Uint8Array) => void
  /** True while the consumer wants no more frames. */
  isFull: () => boolean
  onConnectionChange?: (connected: boolean) => void
  maxBackoffMs?: number
}

export class FirehoseSource {
  private ws: WebSocket | undefined
  private stopped = false
  private attempt = 0
  private readonly opts: SourceOptions
  private timer: NodeJS.Timeout | undefined

  constructor(opts: SourceOptions) {
    this.opts = opts
  }

  start(): void {
    this.stopped = false
    this.connect()
  }

  /** Called by the consumer when it has room again. */
  resume(): void {
    if (this.ws?.isPaused && !this.opts.isFull()) this.ws.resume()
  }

  stop(): void {
    this.stopped = true
    clearTimeout(this.timer)
    this.ws?.terminate()
    this.ws = undefined
  }

  private connect(): void {
    const url = new URL('/xrpc/com.atproto.sync.subscribeRepos', this.opts.url)
    const cursor = this.opts.cursor()
    if (cursor !== undefined) url.searchParams.set('cursor', String(cursor))
    const ws = new WebSocket(url, { maxPayload: 16 * 1024 * 1024 })
    this.ws = ws
    ws.binaryType = 'nodebuffer'
    ws.on('open', () => {
      this.attempt = 0
      log.info({ url: url.toString() }, 'firehose connected')
      this.opts.onConnectionChange?.(true)
    })
    ws.on('message', (data: Buffer) => {
      this.opts.onFrame(new Uint8Array(data.buffer, data.byteOffset, data.byteLength))
      if (this.opts.isFull()) ws.pause()
    })
    ws.on('error', (err) => log.warn({ err: err.message, url: this.opts.url }, 'firehose error'))
    ws.on('close', (code) => {
      this.opts.onConnectionChange?.(false)
      if (this.stopped || this.ws !== ws) return
      const delay = Math.min(this.opts.maxBackoffMs ?? 30_000, 250 * 2 ** this.attempt++)
      log.info({ code, delay }, 'firehose closed, reconnecting')
      this.timer = setTimeout(() => this.connect(), delay)
    })
  }
}

// A stream connection (a relay's subscribeRepos, or Jetstream) that reconnects with backoff from
// the latest cursor and pauses the socket while the consumer is behind, so a fast source cannot
// grow our memory without bound.
import WebSocket from 'ws'
import { childLogger } from '@openplane/telemetry'

const log = childLogger('stream')

export interface SourceOptions {
  /** Where to connect to resume from `cursor` (undefined: the live tip). */
  endpoint: (cursor: number | undefined) => URL
  /** The cursor to resume from (undefined: from the live tip). */
  cursor: () => number | undefined
  onFrame: (bytes: Uint8Array) => void
  /** True while the consumer wants no more frames. */
  isFull: () => boolean
  onConnectionChange?: (connected: boolean) => void
  /** A connection failed or closed abnormally (for health: the last error a source had). */
  onError?: (message: string) => void
  maxBackoffMs?: number
}

export class StreamSource {
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
    const url = this.opts.endpoint(this.opts.cursor())
    const ws = new WebSocket(url, { maxPayload: 16 * 1024 * 1024 })
    this.ws = ws
    ws.binaryType = 'nodebuffer'
    ws.on('open', () => {
      this.attempt = 0
      log.info({ url: url.toString() }, 'stream connected')
      this.opts.onConnectionChange?.(true)
    })
    ws.on('message', (data: Buffer) => {
      this.opts.onFrame(new Uint8Array(data.buffer, data.byteOffset, data.byteLength))
      if (this.opts.isFull()) ws.pause()
    })
    ws.on('error', (err) => {
      log.warn({ err: err.message, url: url.origin }, 'stream error')
      this.opts.onError?.(err.message)
    })
    ws.on('close', (code) => {
      this.opts.onConnectionChange?.(false)
      if (!this.stopped && code !== 1000) this.opts.onError?.(`stream closed (code ${code})`)
      if (this.stopped || this.ws !== ws) return
      const delay = Math.min(this.opts.maxBackoffMs ?? 30_000, 250 * 2 ** this.attempt++)
      log.info({ code, delay }, 'stream closed, reconnecting')
      this.timer = setTimeout(() => this.connect(), delay)
    })
  }
}

// A stream connection (a relay's subscribeRepos, or Jetstream) that reconnects with backoff from
// the latest cursor and pauses the socket while the consumer is behind, so a fast source cannot
// grow our memory without bound.
import WebSocket from 'ws'
import { childLogger } from '@openplane/telemetry'

const log = childLogger('stream')

export interface SourceOptions {
  /** Where to connect to resume from `cursor` (undefined: the live tip). */
  endpoint: (cursor: number | undefined) => URL
  /**
   * The cursor to resume from (undefined: from the live tip), asked for at each connect. It may
   * wait: the consumer answers once every frame already received is taken into account.
   */
  cursor: () => number | undefined | Promise<number | undefined>
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
    void this.connect()
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

  private async connect(): Promise<void> {
    let url: URL
    let ws: WebSocket
    try {
      url = this.opts.endpoint(await this.opts.cursor())
      if (this.stopped) return
      ws = new WebSocket(url, { maxPayload: 16 * 1024 * 1024 })
    } catch (err) {
      // Not even a connection attempt: report it and try again later, like a failed one.
      this.opts.onError?.(err instanceof Error ? err.message : String(err))
      this.retry()
      return
    }
    this.attach(ws, url)
  }

  /** The next attempt, after a backoff that doubles from 250 ms (reset once one connects). */
  private retry(code?: number): void {
    if (this.stopped) return
    const delay = Math.min(this.opts.maxBackoffMs ?? 30_000, 250 * 2 ** this.attempt++)
    log.info({ code, delay }, 'stream closed, reconnecting')
    this.timer = setTimeout(() => void this.connect(), delay)
  }

  private attach(ws: WebSocket, url: URL): void {
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
    let failed = false
    ws.on('error', (err) => {
      failed = true
      log.warn({ err: err.message, url: url.origin }, 'stream error')
      this.opts.onError?.(err.message)
    })
    ws.on('close', (code) => {
      this.opts.onConnectionChange?.(false)
      // An error already said why; otherwise the close code is all there is.
      if (!this.stopped && !failed && code !== 1000) {
        this.opts.onError?.(`stream closed (code ${code})`)
      }
      if (this.ws === ws) this.retry(code)
    })
  }
}

// Where the source's stream is now. The firehose carries no "head" field, and while the indexer
// is behind its own connection only shows what backpressure lets through. So every so often a
// second connection opens at the live tip (no cursor), reads the first frame's seq and time, and
// closes: lag in events (head seq − committed seq; a relay numbers its events one by one) and in
// stream seconds (head time − committed event time) follow, whatever the wall clock says.
import { decodeAll } from '@atproto/lex-cbor'
import WebSocket from 'ws'
import { childLogger } from '@openplane/telemetry'

const log = childLogger('head-probe')

export interface Head {
  seq: number
  time: string
  /** When it was read (ms since epoch). */
  at: number
}

export class HeadProbe {
  private readonly url: URL
  private readonly everyMs: number
  private readonly timeoutMs: number
  private timer: NodeJS.Timeout | undefined
  private stopped = false
  head: Head | undefined

  constructor(source: string, everyMs: number, timeoutMs = 10_000) {
    this.url = new URL('/xrpc/com.atproto.sync.subscribeRepos', source)
    this.everyMs = everyMs
    this.timeoutMs = timeoutMs
  }

  start(): void {
    this.stopped = false
    void this.probe()
  }

  stop(): void {
    this.stopped = true
    clearTimeout(this.timer)
  }

  private async probe(): Promise<void> {
    try {
      const head = await this.readHead()
      if (head) this.head = head
    } catch (err) {
      log.debug({ err: (err as Error).message, url: this.url.toString() }, 'head probe failed')
    }
    if (!this.stopped) {
      this.timer = setTimeout(() => void this.probe(), this.everyMs)
      this.timer.unref()
    }
  }

  /** The first frame at the live tip: its seq and time (undefined if none came in time). */
  private readHead(): Promise<Head | undefined> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(this.url, { maxPayload: 16 * 1024 * 1024 })
      const done = (head: Head | undefined, err?: Error) => {
        clearTimeout(timer)
        ws.removeAllListeners()
        ws.on('error', () => undefined)
        ws.terminate()
        if (err) reject(err)
        else resolve(head)
      }
      const timer = setTimeout(() => done(undefined), this.timeoutMs)
      ws.on('message', (data: Buffer) => {
        try {
          const [, body] = [...decodeAll(data)] as [unknown, { seq?: unknown; time?: unknown }]
          if (typeof body?.seq === 'number' && typeof body.time === 'string') {
            return done({ seq: body.seq, time: body.time, at: Date.now() })
          }
          // An #info or error frame: no position in it; wait for the next.
        } catch (err) {
          done(undefined, err as Error)
        }
      })
      ws.on('error', (err: Error) => done(undefined, err))
      ws.on('close', () => done(undefined))
    })
  }
}

// GET requests over kept connections, a bounded number of them per host: for the hosts the
// operator configures (the PLC directory; a test network's PDS), which need none of the checks a
// host named by the network gets (those requests keep @atproto/identity's guarded fetch).
//
// Why not the platform fetch: each request builds web streams and request/response machinery
// that cost more CPU than the lookup itself, and its pool opens one connection per concurrent
// request, so a burst of new accounts (a batch resolving hundreds of DIDs at once) opened and
// closed hundreds of connections, to the directory's harm as much as ours.
import http from 'node:http'
import https from 'node:https'

export interface KeptClientOptions {
  /** Connections per host at most; further requests wait for one (default 16). */
  sockets?: number
}

export interface KeptResponse {
  status: number
  body: Buffer
}

export class KeptClient {
  private readonly httpAgent: http.Agent
  private readonly httpsAgent: https.Agent

  constructor(opts: KeptClientOptions = {}) {
    const sockets = opts.sockets ?? 16
    const agent = { keepAlive: true, maxSockets: sockets, maxFreeSockets: sockets }
    this.httpAgent = new http.Agent(agent)
    this.httpsAgent = new https.Agent(agent)
  }

  /**
   * GETs `url`, the whole body buffered (at most `maxBytes`). Rejects on a network error, a
   * body too large, or when `signal` aborts (with its reason).
   */
  get(
    url: URL,
    opts: { headers?: Record<string, string>; signal?: AbortSignal; maxBytes?: number } = {},
  ): Promise<KeptResponse> {
    const { signal, maxBytes = 512 * 1024 } = opts
    const secure = url.protocol === 'https:'
    const get = secure ? https.get : http.get
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason as Error)
      let settled = false
      const settle = (fn: () => void) => {
        if (settled) return
        settled = true
        signal?.removeEventListener('abort', abort)
        fn()
      }
      const fail = (err: Error) => {
        settle(() => reject(err))
        req.destroy()
      }
      const req = get(
        url,
        { agent: secure ? this.httpsAgent : this.httpAgent, headers: opts.headers ?? {} },
        (res) => {
          const chunks: Buffer[] = []
          let size = 0
          res.on('data', (chunk: Buffer) => {
            size += chunk.length
            if (size <= maxBytes) chunks.push(chunk)
            else fail(new Error(`response from ${url.host} over ${maxBytes} bytes`))
          })
          res.on('end', () =>
            settle(() => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) })),
          )
          res.on('error', fail)
        },
      )
      const abort = () => fail(signal!.reason as Error)
      signal?.addEventListener('abort', abort, { once: true })
      req.on('error', fail)
    })
  }

  close(): void {
    this.httpAgent.destroy()
    this.httpsAgent.destroy()
  }
}

// GET requests over kept connections, a bounded number of them per host: for the hosts the
// operator configures (the PLC directory; a test network's PDS), which need none of the checks a
// host named by the network gets (those requests keep @atproto/identity's guarded fetch).
//
// Why not the platform fetch: each request builds web streams and request/response machinery
// that cost more CPU than the lookup itself, and its pool opens one connection per concurrent
// request, so a burst of new accounts (a batch resolving hundreds of DIDs at once) opened and
// closed hundreds of connections, to the directory's harm as much as ours. Why undici's own
// request API rather than node:http: half the CPU per request (17 against 33–41 µs measured on
// loopback with 16 kept connections), and a burst of new accounts makes these requests most of
// the lookup thread's work.
import { Agent } from 'undici'

export interface KeptClientOptions {
  /** Connections per host at most; further requests wait for one (default 16). */
  sockets?: number
}

export interface KeptResponse {
  status: number
  body: Buffer
}

export class KeptClient {
  private readonly agent: Agent

  constructor(opts: KeptClientOptions = {}) {
    this.agent = new Agent({ connections: opts.sockets ?? 16 })
  }

  /**
   * GETs `url`, the whole body buffered (at most `maxBytes`). Rejects on a network error, a
   * body too large, past `timeoutMs`, or when `signal` aborts (with its reason). The timeout is
   * a timer cleared with the answer, not an AbortSignal.timeout: that one fires for every
   * request, answered or not, building an error with its stack each time (0.7 s of the lookup
   * thread's 3.9 s of CPU per 100k events of the ingest bench, with the collection after).
   */
  async get(
    url: URL,
    opts: {
      headers?: Record<string, string>
      signal?: AbortSignal
      timeoutMs?: number
      maxBytes?: number
    } = {},
  ): Promise<KeptResponse> {
    const { timeoutMs } = opts
    if (timeoutMs === undefined) return this.fetch(url, opts)
    const controller = new AbortController()
    const timer = setTimeout(
      () => controller.abort(new Error(`${url.host} did not answer within ${timeoutMs} ms`)),
      timeoutMs,
    )
    const signal = opts.signal
      ? AbortSignal.any([opts.signal, controller.signal])
      : controller.signal
    try {
      return await this.fetch(url, { ...opts, signal })
    } finally {
      clearTimeout(timer)
    }
  }

  private async fetch(
    url: URL,
    opts: { headers?: Record<string, string>; signal?: AbortSignal; maxBytes?: number },
  ): Promise<KeptResponse> {
    const { signal, maxBytes = 512 * 1024 } = opts
    signal?.throwIfAborted()
    const res = await this.agent.request({
      origin: url.origin,
      path: url.pathname + url.search,
      method: 'GET',
      headers: opts.headers ?? {},
      ...(signal && { signal }),
    })
    const chunks: Buffer[] = []
    let size = 0
    for await (const chunk of res.body as AsyncIterable<Buffer>) {
      size += chunk.length
      if (size > maxBytes) {
        res.body.destroy()
        throw new Error(`response from ${url.host} over ${maxBytes} bytes`)
      }
      chunks.push(chunk)
    }
    return {
      status: res.statusCode,
      body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks),
    }
  }

  close(): void {
    void this.agent.destroy()
  }
}

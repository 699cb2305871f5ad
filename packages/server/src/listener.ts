// One port for every wire the AppView may use: gRPC over HTTP/1.1 and over cleartext HTTP/2
// (prior knowledge, the AppView's default), gRPC-web and Connect. Cleartext HTTP/2 has no ALPN,
// so each connection is classified by its first bytes: the HTTP/2 preface or an HTTP/1 request line.
//
// Limits apply at accept, before any protocol: clients outside the allowed networks and
// connections beyond the cap are closed at once; a connection that sends nothing is closed after
// the first-byte deadline (Node's HTTP timeouts only start once a protocol has the socket), and
// any connection idle longer than the idle timeout after that.
import http from 'node:http'
import http2 from 'node:http2'
import net from 'node:net'
import type { AddressInfo } from 'node:net'
import type { TLSSocket } from 'node:tls'
import { counter } from '@openplane/telemetry'

const refusedTotal = counter(
  'openplane_connections_refused_total',
  'Connections closed at accept, by reason (not_allowed: outside DATAPLANE_ALLOW_FROM; over_cap)',
  ['reason'],
)
const timedOutTotal = counter(
  'openplane_connections_timed_out_total',
  'Connections closed for silence, by phase (first_byte, idle)',
  ['phase'],
)

export type RequestHandler = (
  req: http.IncomingMessage | http2.Http2ServerRequest,
  res: http.ServerResponse | http2.Http2ServerResponse,
) => void

/**
 * Takes an HTTP/2 stream before Node's compatibility layer wraps it in a request and response
 * (true: served), or leaves it to the request handler (false).
 */
export type StreamHandler = (
  stream: http2.ServerHttp2Stream,
  headers: http2.IncomingHttpHeaders,
) => boolean

export interface ListenOptions {
  host: string
  port: number
  /** PEM key and certificate: serve TLS with ALPN h2 + http/1.1 instead of cleartext. */
  tls?: { key: string | Buffer; cert: string | Buffer }
  limits?: Partial<ConnectionLimits>
}

export interface ConnectionLimits {
  /** Client networks allowed to connect (CIDRs); undefined: any. */
  allowFrom?: string[]
  /** Open connections at most. */
  maxConnections: number
  /** A new connection's first bytes (or TLS handshake) must come within this. */
  firstByteMs: number
  /** A connection with no traffic for this long is closed. */
  idleMs: number
  /**
   * Open streams (calls) per HTTP/2 connection, advertised as SETTINGS_MAX_CONCURRENT_STREAMS:
   * past it, the caller's HTTP/2 client holds new calls back itself. The AppView sends every call
   * for a URL over one connection; with no bound, a server past its capacity holds every waiting
   * call as an open stream until the session's memory passes its limit, and nghttp2 then answers
   * ENHANCE_YOUR_CALM and closes the connection, failing every call on it (seen in
   * bench:timeline's overload step).
   */
  maxStreams: number
}

/**
 * Memory an HTTP/2 session may hold (MB; Node's default is 10), well above what `maxStreams`
 * streams take, so the stream bound is the one that acts.
 */
const H2_SESSION_MEMORY_MB = 128

export const DEFAULT_LIMITS: ConnectionLimits = {
  maxConnections: 10_000,
  firstByteMs: 10_000,
  idleMs: 10 * 60_000,
  maxStreams: 4000,
}

/** A BlockList of the allowed networks (IPv4 and IPv6 CIDRs, or single addresses). */
export function allowList(cidrs: string[]): net.BlockList {
  const list = new net.BlockList()
  for (const spec of cidrs) {
    const [addr, bits] = spec.split('/') as [string, string | undefined]
    const type = net.isIPv6(addr) ? 'ipv6' : 'ipv4'
    if (!net.isIP(addr)) throw new Error(`not an address or network: ${spec}`)
    const prefix = bits === undefined ? (type === 'ipv6' ? 128 : 32) : Number(bits)
    if (!Number.isInteger(prefix) || prefix < 0 || prefix > (type === 'ipv6' ? 128 : 32)) {
      throw new Error(`bad prefix length in ${spec}`)
    }
    list.addSubnet(addr, prefix, type)
  }
  return list
}

function allowed(list: net.BlockList, address: string | undefined): boolean {
  if (!address) return false
  // IPv4 clients of a dual-stack socket show as ::ffff:a.b.c.d.
  const v4 = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1]
  if (v4) return list.check(v4, 'ipv4')
  return list.check(address, net.isIPv6(address) ? 'ipv6' : 'ipv4')
}

export interface Listener {
  port: number
  /**
   * Stops accepting, lets requests in flight finish (HTTP/2 sessions get a GOAWAY), and after
   * `drainMs` at most closes whatever is left.
   */
  close(drainMs?: number): Promise<void>
}

const H2_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n')

export async function listen(
  serve: RequestHandler,
  opts: ListenOptions,
  serveStream?: StreamHandler,
): Promise<Listener> {
  const limits = { ...DEFAULT_LIMITS, ...opts.limits }
  const h2Options = {
    settings: { maxConcurrentStreams: limits.maxStreams },
    maxSessionMemory: H2_SESSION_MEMORY_MB,
  }
  // Requests in flight, so a close can wait for them.
  let inFlight = 0
  let drained: (() => void) | undefined
  const track = (closable: { once(event: 'close', listener: () => void): unknown }) => {
    inFlight++
    closable.once('close', () => {
      inFlight--
      if (inFlight === 0) drained?.()
    })
  }
  const handler: RequestHandler = (req, res) => {
    track(res)
    serve(req, res)
  }
  const streams = (h2: http2.Http2Server | http2.Http2SecureServer) => {
    if (serveStream)
      takeStreams(h2, (stream, headers) => {
        if (!serveStream(stream, headers)) return false
        track(stream)
        return true
      })
  }
  const allow = limits.allowFrom ? allowList(limits.allowFrom) : undefined
  const sockets = new Set<net.Socket>()
  /**
   * Closes a silent HTTP/1.1 connection: idle from now on (the first-byte deadline has passed).
   * Not for HTTP/2: nghttp2 reads and writes its socket natively, so the socket's own timer never
   * sees that traffic and would cut a busy connection, calls in flight and all, `idleMs` after it
   * opened. HTTP/2 sessions have their own timer (`sessionIdle`).
   */
  const idle = (socket: net.Socket) => {
    socket.setTimeout(limits.idleMs)
    socket.removeAllListeners('timeout')
    socket.on('timeout', () => {
      timedOutTotal.inc({ phase: 'idle' })
      socket.destroy()
    })
  }
  /** The socket's timer off: the session's, refreshed by its frames, says when it is idle. */
  const h2Socket = (socket: net.Socket) => {
    socket.setTimeout(0)
    socket.removeAllListeners('timeout')
  }
  /**
   * An HTTP/2 session silent for `idleMs` is closed with a GOAWAY, so the caller opens a new one
   * for its next call instead of failing it; a call still open gets `idleMs` more to finish.
   */
  const sessionIdle = (h2: http2.Http2Server | http2.Http2SecureServer) => {
    h2.setTimeout(limits.idleMs)
    h2.on('timeout', (session: http2.Http2Session | net.Socket) => {
      timedOutTotal.inc({ phase: 'idle' })
      if (!('goaway' in session)) return void session.destroy()
      session.close()
      const cut = setTimeout(() => session.destroy(), limits.idleMs).unref()
      session.once('close', () => clearTimeout(cut))
    })
  }
  let outer: net.Server
  let sessions: Set<http2.Http2Session>
  if (opts.tls) {
    const h2 = http2.createSecureServer(
      { ...opts.tls, ...h2Options, allowHTTP1: true, handshakeTimeout: limits.firstByteMs },
      handler,
    )
    streams(h2)
    h2.on('secureConnection', (socket: TLSSocket) =>
      socket.alpnProtocol === 'h2' ? h2Socket(socket) : idle(socket),
    )
    sessionIdle(h2)
    sessions = trackSessions(h2)
    outer = h2
  } else {
    const h1 = http.createServer(handler as http.RequestListener)
    // Node sets a kept-alive socket's timeout to this after each response.
    h1.keepAliveTimeout = Math.min(65_000, limits.idleMs)
    const h2 = http2.createServer(h2Options, handler)
    streams(h2)
    sessionIdle(h2)
    sessions = trackSessions(h2)
    outer = net.createServer((socket) => {
      socket.setTimeout(limits.firstByteMs)
      socket.once('timeout', () => {
        timedOutTotal.inc({ phase: 'first_byte' })
        socket.destroy()
      })
      socket.once('readable', () => {
        const head: Buffer | null = socket.read(H2_PREFACE.length) ?? socket.read()
        if (head === null) return socket.destroy()
        socket.unshift(head)
        const isH2 = head.equals(H2_PREFACE.subarray(0, head.length))
        if (isH2) h2Socket(socket)
        else idle(socket)
        ;(isH2 ? h2 : h1).emit('connection', socket)
      })
    })
  }
  // First of the 'connection' listeners (registered before the protocol's own sees the socket).
  outer.prependListener('connection', (s: net.Socket) => {
    if (allow && !allowed(allow, s.remoteAddress)) {
      refusedTotal.inc({ reason: 'not_allowed' })
      s.destroy()
      return
    }
    if (sockets.size >= limits.maxConnections) {
      refusedTotal.inc({ reason: 'over_cap' })
      s.destroy()
      return
    }
    sockets.add(s)
    s.once('close', () => sockets.delete(s))
  })
  await new Promise<void>((resolve, reject) => {
    outer.once('error', reject)
    outer.listen(opts.port, opts.host, () => resolve())
  })
  return {
    port: (outer.address() as AddressInfo).port,
    async close(drainMs = 0) {
      const closed = new Promise<void>((resolve) => outer.close(() => resolve()))
      for (const s of sessions) s.close()
      if (inFlight > 0 && drainMs > 0) {
        await Promise.race([
          new Promise<void>((resolve) => (drained = resolve)),
          new Promise((resolve) => setTimeout(resolve, drainMs).unref()),
        ])
      }
      for (const s of sockets) s.destroy()
      await closed
    },
  }
}

/**
 * Puts `take` in front of the server's compatibility layer: Node wraps every stream in a request
 * and response from its own 'stream' listener, added with the 'request' listener; that listener
 * now runs only for the streams `take` leaves.
 */
function takeStreams(
  server: http2.Http2Server | http2.Http2SecureServer,
  take: StreamHandler,
): void {
  type OnStream = (this: unknown, ...args: unknown[]) => void
  const compat = server.listeners('stream') as OnStream[]
  if (compat.length !== 1) {
    throw new Error(`expected one compatibility 'stream' listener, found ${compat.length}`)
  }
  const wrap = compat[0]!
  server.removeListener('stream', wrap)
  server.on('stream', function (this: unknown, ...args: unknown[]) {
    const [stream, headers] = args as [http2.ServerHttp2Stream, http2.IncomingHttpHeaders]
    if (!take(stream, headers)) wrap.apply(this, args)
  })
}

function trackSessions(
  server: http2.Http2Server | http2.Http2SecureServer,
): Set<http2.Http2Session> {
  const sessions = new Set<http2.Http2Session>()
  server.on('session', (s: http2.Http2Session) => {
    sessions.add(s)
    s.once('close', () => sessions.delete(s))
  })
  return sessions
}

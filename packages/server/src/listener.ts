// One port for every wire the AppView may use: gRPC over HTTP/1.1 and over cleartext HTTP/2
// (prior knowledge, the AppView's default), gRPC-web and Connect. Cleartext HTTP/2 has no ALPN,
// so each connection is classified by its first bytes: the HTTP/2 preface or an HTTP/1 request line.
import http from 'node:http'
import http2 from 'node:http2'
import net from 'node:net'
import type { AddressInfo } from 'node:net'

export type RequestHandler = (
  req: http.IncomingMessage | http2.Http2ServerRequest,
  res: http.ServerResponse | http2.Http2ServerResponse,
) => void

export interface ListenOptions {
  host: string
  port: number
  /** PEM key and certificate: serve TLS with ALPN h2 + http/1.1 instead of cleartext. */
  tls?: { key: string | Buffer; cert: string | Buffer }
}

export interface Listener {
  port: number
  close(): Promise<void>
}

const H2_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n')

export async function listen(handler: RequestHandler, opts: ListenOptions): Promise<Listener> {
  const sockets = new Set<net.Socket>()
  let outer: net.Server
  let sessions: Set<http2.Http2Session>
  if (opts.tls) {
    const h2 = http2.createSecureServer({ ...opts.tls, allowHTTP1: true }, handler)
    sessions = trackSessions(h2)
    outer = h2
  } else {
    const h1 = http.createServer(handler as http.RequestListener)
    h1.keepAliveTimeout = 65_000
    const h2 = http2.createServer(handler)
    sessions = trackSessions(h2)
    outer = net.createServer((socket) => {
      socket.once('readable', () => {
        const head: Buffer | null = socket.read(H2_PREFACE.length) ?? socket.read()
        if (head === null) return socket.destroy()
        socket.unshift(head)
        const isH2 = head.equals(H2_PREFACE.subarray(0, head.length))
        ;(isH2 ? h2 : h1).emit('connection', socket)
      })
    })
  }
  outer.on('connection', (s: net.Socket) => {
    sockets.add(s)
    s.once('close', () => sockets.delete(s))
  })
  await new Promise<void>((resolve, reject) => {
    outer.once('error', reject)
    outer.listen(opts.port, opts.host, () => resolve())
  })
  return {
    port: (outer.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        outer.close(() => resolve())
        for (const s of sessions) s.close()
        for (const s of sockets) s.destroy()
      }),
  }
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

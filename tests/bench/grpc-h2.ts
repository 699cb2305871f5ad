// A lean gRPC client for the read benchmarks: unary calls over node:http2 with request frames
// encoded once up front, so the load driver spends its CPU on the wire, not on Connect's
// per-call machinery (which costs a caller more than our server spends answering, and shares
// this machine's two cores with the server it measures). The AppView's own client (Connect) is
// what the end-to-end figure and the `connect` driver use; this one measures the dataplane.
import http2 from 'node:http2'
import { Code, ConnectError } from '@connectrpc/connect'

const GET_TIMELINE = '/bsky.Service/GetTimeline'

export interface RawGrpcClient {
  /** One GetTimeline call with a pre-encoded frame (timelineRequestFrame, load-generator.ts); rejects with a ConnectError on a non-ok status. */
  getTimeline(frame: Buffer): Promise<void>
  close(): void
}

/**
 * Sessions to each url (`perUrl` each), calls spread over them in turn, as the AppView spreads
 * its calls over the urls it is given.
 */
export function rawGrpcClient(urls: readonly string[], perUrl = 1): RawGrpcClient {
  const sessions: http2.ClientHttp2Session[] = []
  for (const url of urls) {
    for (let i = 0; i < perUrl; i++) {
      const s = http2.connect(url)
      s.on('error', () => {}) // a failed call rejects on its own stream
      s.setMaxListeners(0)
      sessions.push(s)
    }
  }
  let next = 0
  return {
    getTimeline(frame) {
      const session = sessions[next++ % sessions.length]!
      return new Promise((resolve, reject) => {
        const stream = session.request({
          ':method': 'POST',
          ':path': GET_TIMELINE,
          'content-type': 'application/grpc',
          te: 'trailers',
        })
        let status: string | undefined
        let message = ''
        const take = (h: http2.IncomingHttpHeaders) => {
          const s = h['grpc-status']
          if (typeof s === 'string') {
            status = s
            message = decodeURIComponent(String(h['grpc-message'] ?? ''))
          }
        }
        stream.on('response', take)
        stream.on('trailers', take)
        stream.on('data', () => {})
        stream.on('error', (err) => reject(ConnectError.from(err, Code.Unavailable)))
        stream.on('close', () => {
          if (status === '0') resolve()
          else reject(new ConnectError(message || 'no status', Number(status ?? Code.Unknown)))
        })
        stream.end(frame)
      })
    },
    close() {
      for (const s of sessions) s.close()
    },
  }
}

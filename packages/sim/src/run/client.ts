// Timeline request targets of a run: a dataplane's bsky.Service GetTimeline over gRPC, and
// optionally an AppView's app.bsky.feed.getTimeline over HTTP.
import http from 'node:http'
import http2 from 'node:http2'
import https from 'node:https'
import { createPromiseClient, type PromiseClient } from '@connectrpc/connect'
import { createGrpcTransport, Http2SessionManager } from '@connectrpc/connect-node'
import { Service } from '@openplane/proto'
import { didFor } from '../ids.ts'

export interface TimelineTarget {
  /** Label of the target in metrics and reports: "dataplane" or "appview". */
  readonly name: string
  /** One timeline page of user `userId`: the URIs of its items, newest first. */
  getTimeline(userId: number, limit: number, timeoutMs: number): Promise<string[]>
  close(): void
}

export type HttpVersion = '1.1' | '2'

/** A bsky.Service client with its connection, closed by `close()`. */
export interface DataplaneClient {
  rpc: PromiseClient<typeof Service>
  httpVersion: HttpVersion
  close(): void
}

export function dataplaneClient(url: string, httpVersion: HttpVersion): DataplaneClient {
  if (httpVersion === '2') {
    const sessionManager = new Http2SessionManager(url, { idleConnectionTimeoutMs: 60_000 })
    const transport = createGrpcTransport({ baseUrl: url, httpVersion: '2', sessionManager })
    return {
      rpc: createPromiseClient(Service, transport),
      httpVersion,
      close: () => sessionManager.abort(),
    }
  }
  const agent = url.startsWith('https:')
    ? new https.Agent({ keepAlive: true })
    : new http.Agent({ keepAlive: true })
  const transport = createGrpcTransport({
    baseUrl: url,
    httpVersion: '1.1',
    nodeOptions: { agent },
  })
  return { rpc: createPromiseClient(Service, transport), httpVersion, close: () => agent.destroy() }
}

/**
 * The HTTP version a dataplane speaks gRPC over: HTTP/2 (ours, or any h2c/TLS gRPC server) if it
 * answers the HTTP/2 preface, else HTTP/1.1 (the stock dataplane is an express app); then a Ping
 * over it must succeed.
 */
export async function detectHttpVersion(url: string, timeoutMs = 3000): Promise<HttpVersion> {
  const version: HttpVersion = (await speaksHttp2(url, timeoutMs)) ? '2' : '1.1'
  const client = dataplaneClient(url, version)
  try {
    await client.rpc.ping({}, { timeoutMs })
    return version
  } catch (err) {
    throw new Error(
      `dataplane at ${url} did not answer Ping over HTTP/${version}: ${(err as Error).message}`,
    )
  } finally {
    client.close()
  }
}

/** Whether the server sends HTTP/2 SETTINGS in reply to the connection preface. */
function speaksHttp2(url: string, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    let settled = false
    const session = http2.connect(url)
    // An HTTP/1.1 server answers the preface with a 400: a protocol error, possibly late.
    session.on('error', () => finish(false))
    const timer = setTimeout(() => finish(false), timeoutMs)
    const finish = (ok: boolean): void => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      session.destroy()
      resolve(ok)
    }
    session.once('remoteSettings', () => finish(true))
    session.once('close', () => finish(false))
  })
}

export function dataplaneTarget(client: DataplaneClient): TimelineTarget {
  return {
    name: 'dataplane',
    async getTimeline(userId, limit, timeoutMs) {
      // The grpc-timeout header takes whole milliseconds only.
      const timeout = Math.max(1, Math.ceil(timeoutMs))
      const res = await client.rpc.getTimeline(
        { actorDid: didFor(userId), limit },
        { timeoutMs: timeout },
      )
      return res.items.map((item) => item.uri)
    },
    close: () => client.close(),
  }
}

export interface AppviewOptions {
  /** Base URL of the AppView, e.g. http://127.0.0.1:2584. */
  url: string
  /**
   * An admin password of the AppView (one of its BSKY_ADMIN_PASSWORDS). Requests then carry
   * `Authorization: Basic admin:<password>` and `appview-as-did: <user's DID>`, which the stock
   * AppView accepts as that user's session (its test-only form of standard auth).
   */
  adminPassword?: string
  /**
   * Headers for a user's request instead, e.g. a service JWT signed with the user's key:
   * `{ authorization: 'Bearer <jwt>' }`. Takes precedence over adminPassword.
   */
  headers?: (userId: number, did: string) => Record<string, string>
}

/** app.bsky.feed.getTimeline against an AppView; needs auth (see AppviewOptions). */
export function appviewTarget(opts: AppviewOptions): TimelineTarget {
  const base = opts.url.replace(/\/+$/, '')
  const basic = opts.adminPassword
    ? `Basic ${Buffer.from(`admin:${opts.adminPassword}`).toString('base64')}`
    : undefined
  return {
    name: 'appview',
    async getTimeline(userId, limit, timeoutMs) {
      const actorDid = didFor(userId)
      const headers = opts.headers
        ? opts.headers(userId, actorDid)
        : basic
          ? { authorization: basic, 'appview-as-did': actorDid }
          : {}
      const res = await fetch(`${base}/xrpc/app.bsky.feed.getTimeline?limit=${limit}`, {
        headers,
        signal: AbortSignal.timeout(timeoutMs),
      })
      const text = await res.text()
      if (!res.ok) throw new Error(`appview getTimeline: HTTP ${res.status} ${text.slice(0, 200)}`)
      const body = JSON.parse(text) as { feed?: { post?: { uri?: string } }[] }
      return (body.feed ?? []).map((item) => item.post?.uri ?? '')
    },
    close: () => {},
  }
}

// The bsky.Service server: route modules per proto area behind one Connect router, plus the
// operational endpoints (/_health, /metrics, …) on the same port or on an ops port of their own.
import http from 'node:http'
import type http2 from 'node:http2'
import type { AddressInfo } from 'node:net'
import { Code, ConnectError, type ConnectRouter, type Interceptor } from '@connectrpc/connect'
import { connectNodeAdapter } from '@connectrpc/connect-node'
import { Service } from '@openplane/proto'
import { childLogger, counter, histogram, registry, throttle } from '@openplane/telemetry'
import { shedTotal, startAdmission, type Admission } from './admission.ts'
import { directLane, type RpcOutcome } from './direct.ts'
import { checkRequest, classify, MAX_LIST_ITEMS } from './errors.ts'
import { listen, type ListenOptions, type Listener } from './listener.ts'
import { directRoutes } from './direct-routes.ts'
import { buildRoutes, type RouteContext } from './routes/index.ts'
import { overloaded } from './routes/util/overloaded.ts'

const log = childLogger('server')

const rpcSeconds = histogram('openplane_rpc_duration_seconds', 'bsky.Service rpc latency', [
  'method',
  'code',
])
const rpcLanes = counter(
  'openplane_rpc_lane_total',
  'rpcs by the lane that took them (direct: gRPC over HTTP/2, as the AppView calls; connect: every other wire)',
  ['lane'],
)

export interface HealthReport {
  ready: boolean
  [key: string]: unknown
}

export interface ServerOptions extends ListenOptions {
  ctx: RouteContext
  /** A request body larger than this is refused (resource_exhausted) without being read whole. */
  maxRequestBytes?: number
  /** A repeated field with more items is refused (invalid_argument); default MAX_LIST_ITEMS. */
  maxListItems?: number
  /**
   * Refuse new rpcs (resource_exhausted) while the event loop's recent delay exceeds this many
   * ms (admission.ts); 0 or unset: never.
   */
  shedDelayMs?: number
  /**
   * Direct-lane reads (GetTimeline) in progress at once; past it, new ones are refused
   * (resource_exhausted). 0 or unset: no bound.
   */
  maxDirectInFlight?: number
  /** Rpcs of any kind in progress at once on the direct lane (direct.ts); 0 or unset: no bound. */
  maxRpcsInFlight?: number
  /**
   * Serve /metrics, /_health, /_ready, /_live and /_wait on this plain-HTTP port only, apart from
   * the rpc port (which then answers rpcs alone): scrapers and probes need not reach the port
   * the AppView calls, nor it theirs.
   */
  ops?: { host: string; port: number }
  health?: () => Promise<HealthReport>
  /**
   * Backs GET /_wait?seq=N[&source=url][&bsyncOp=N&bsyncMute=N&bsyncNotif=N][&labels=did:seq,…]:
   * answers once that firehose seq, those bsync operation ids and labeler seqs are applied.
   */
  control?: { waitFor(target: WaitTarget): Promise<void> }
}

export interface WaitTarget {
  /** A firehose seq (or Jetstream time_us) of `source` (default: the first source). */
  seq?: number
  source: string
  /** bsync operation ids, per stream. */
  bsync: { op?: string; mute?: string; notif?: string }
  /** Labeler seqs, per labeler DID. */
  labels: Record<string, number>
}

/** The /_wait query as a target; a string saying what is wrong otherwise. */
function waitTarget(q: URLSearchParams): WaitTarget | string {
  const target: WaitTarget = { source: q.get('source') ?? '', bsync: {}, labels: {} }
  const seq = q.get('seq')
  if (seq !== null) {
    if (!Number.isSafeInteger(Number(seq))) return 'seq must be an integer'
    target.seq = Number(seq)
  }
  for (const [param, stream] of [
    ['bsyncOp', 'op'],
    ['bsyncMute', 'mute'],
    ['bsyncNotif', 'notif'],
  ] as const) {
    const v = q.get(param)
    if (v === null || v === '') continue
    if (!/^\d{1,19}$/.test(v)) return `${param} must be an operation id`
    target.bsync[stream] = v
  }
  for (const pair of (q.get('labels') ?? '').split(',').filter(Boolean)) {
    const at = pair.lastIndexOf(':')
    const seq = Number(pair.slice(at + 1))
    if (at <= 0 || !Number.isSafeInteger(seq)) return 'labels must be did:seq[,did:seq…]'
    target.labels[pair.slice(0, at)] = seq
  }
  if (
    target.seq === undefined &&
    !Object.keys(target.bsync).length &&
    !Object.keys(target.labels).length
  ) {
    return 'give seq, bsyncOp/bsyncMute/bsyncNotif or labels'
  }
  return target
}

export interface DataplaneServer {
  port: number
  url: string
  /** Where /metrics and the health endpoints are served: `url` unless an ops port is set. */
  opsUrl: string
  /** Stops accepting; requests in flight get up to `drainMs` to finish (default: none). */
  close(drainMs?: number): Promise<void>
}

/**
 * Times each rpc by method and answer code; refuses rpcs while the process is overloaded, and
 * requests Postgres could not take, before they reach a handler; answers `deadline_exceeded` as
 * soon as the caller's deadline (grpc-timeout or connect-timeout-ms) passes, without waiting for
 * the work; and turns whatever a handler throws into an answer the caller can act on
 * (errors.ts), logging the real error with the request id it was given.
 */
function guard(maxListItems: number, outcome: RpcOutcome, admission: Admission): Interceptor {
  return (next) => async (req) => {
    const end = rpcSeconds.startTimer({ method: req.method.name })
    rpcLanes.inc({ lane: 'connect' })
    const shed = admission.shed()
    if (shed) shedTotal.inc({ reason: 'loop_delay' })
    const refused = shed
      ? overloaded()
      : req.stream
        ? undefined
        : checkRequest(req.message, maxListItems)
    if (refused) {
      end({ code: Code[refused.code] })
      throw refused
    }
    try {
      const res = await untilDeadline(next(req), req.signal)
      end({ code: 'ok' })
      return res
    } catch (err) {
      throw outcome(req.method.name, err, end)
    }
  }
}

/**
 * The answer for what a handler threw (errors.ts), timed under its code; the real error logged
 * with the request id the caller was given (an outage's `unavailable`: one line per 10 s).
 */
function rpcOutcome(): RpcOutcome {
  const unavailableLog = throttle(10_000)
  return (method, err, end) => {
    const { error, requestId } = classify(err)
    end({ code: Code[error.code] ?? String(error.code) })
    if (requestId) {
      if (error.code === Code.Unavailable) {
        unavailableLog((suppressed) =>
          log.warn(
            { err: errText(err), method, requestId, suppressed },
            'rpc failed: a dependency is unavailable',
          ),
        )
      } else {
        log.error({ err, method, requestId }, 'rpc failed')
      }
    }
    return error
  }
}

/** The error's own message (and its cause's), without the stack: enough to tell outages apart. */
function errText(err: unknown): string {
  const cause = err instanceof ConnectError ? (err.cause ?? err) : err
  return cause instanceof Error ? cause.message : String(cause)
}

/**
 * `work`, or a rejection as soon as the request's signal aborts: its deadline passed (answered
 * `deadline_exceeded`) or the caller went away (counted `canceled`). The work is left to finish
 * on its own; the statement timeout bounds what it can still hold in Postgres.
 */
function untilDeadline<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  const reason = () =>
    signal.reason instanceof ConnectError
      ? signal.reason
      : new ConnectError('the caller cancelled the request', Code.Canceled)
  if (signal.aborted) return Promise.reject(reason())
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(reason())
    signal.addEventListener('abort', onAbort, { once: true })
    work.then(
      (v) => {
        signal.removeEventListener('abort', onAbort)
        resolve(v)
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort)
        reject(err as Error)
      },
    )
  })
}

/** Far above the AppView's largest request (a few thousand URIs), far below memory trouble. */
export const DEFAULT_MAX_REQUEST_BYTES = 16 * 1024 * 1024

export async function startServer(opts: ServerOptions): Promise<DataplaneServer> {
  const impl = buildRoutes(opts.ctx)
  const outcome = rpcOutcome()
  const admission = startAdmission(opts.shedDelayMs ?? 0)
  const maxListItems = opts.maxListItems ?? MAX_LIST_ITEMS
  const maxRequestBytes = opts.maxRequestBytes ?? DEFAULT_MAX_REQUEST_BYTES
  const rpc = connectNodeAdapter({
    routes: (router: ConnectRouter) => router.service(Service, impl),
    interceptors: [guard(maxListItems, outcome, admission)],
    // The AppView sends no compression and accepts none; keep payloads plain and cheap.
    acceptCompression: [],
    readMaxBytes: maxRequestBytes,
  })
  const direct = directLane({
    routes: directRoutes(opts.ctx, impl),
    maxRequestBytes,
    maxListItems,
    startTimer: (method) => {
      rpcLanes.inc({ lane: 'direct' })
      return rpcSeconds.startTimer({ method })
    },
    outcome,
    admission,
    maxInFlight: opts.maxDirectInFlight ?? 0,
    maxRpcsInFlight: opts.maxRpcsInFlight ?? 0,
  })
  const health = opts.health ?? (async () => ({ ready: true }))
  /** Answers the operational endpoints; false for any other request. */
  const ops = (
    req: http.IncomingMessage | http2.Http2ServerRequest,
    res: http.ServerResponse | http2.Http2ServerResponse,
  ): boolean => {
    if (req.method !== 'GET') return false
    const path = req.url?.split('?')[0]
    if (path === '/_live') {
      send(res, 200, 'application/json', JSON.stringify({ live: true }))
      return true
    }
    if (path === '/_health' || path === '/_ready') {
      health()
        .then((report) =>
          send(res, report.ready ? 200 : 503, 'application/json', JSON.stringify(report)),
        )
        .catch((err: unknown) => {
          log.error({ err }, 'health check failed')
          send(res, 503, 'application/json', JSON.stringify({ ready: false, error: String(err) }))
        })
      return true
    }
    if (path === '/_wait' && opts.control) {
      const q = new URL(req.url ?? '/', 'http://x').searchParams
      const timeoutMs = Math.min(Number(q.get('timeoutMs') ?? 30_000) || 30_000, 300_000)
      const target = waitTarget(q)
      if (typeof target === 'string') {
        send(res, 400, 'text/plain', target)
        return true
      }
      const timeout = new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error('timeout')), timeoutMs).unref(),
      )
      Promise.race([opts.control.waitFor(target), timeout])
        .then(() => send(res, 200, 'application/json', JSON.stringify(target)))
        .catch((err: unknown) => send(res, 504, 'text/plain', String(err)))
      return true
    }
    if (path === '/metrics') {
      registry
        .metrics()
        .then((text) => send(res, 200, registry.contentType, text))
        .catch(() => send(res, 500, 'text/plain', 'metrics unavailable'))
      return true
    }
    return false
  }
  const opsServer = opts.ops ? await listenOps(opts.ops, ops) : undefined
  const handler = (
    req: http.IncomingMessage | http2.Http2ServerRequest,
    res: http.ServerResponse | http2.Http2ServerResponse,
  ) => {
    if (!opsServer && ops(req, res)) return
    rpc(req, res)
  }
  const listener: Listener = await listen(handler, opts, direct)
  const scheme = opts.tls ? 'https' : 'http'
  log.info({ host: opts.host, port: listener.port, tls: !!opts.tls }, 'bsky.Service listening')
  const url = `${scheme}://${opts.host}:${listener.port}`
  return {
    port: listener.port,
    url,
    opsUrl: opsServer?.url ?? url,
    async close(drainMs?: number) {
      await listener.close(drainMs)
      await opsServer?.close()
      admission.stop()
    },
  }
}

/** The ops port: plain HTTP/1.1, everything but the operational endpoints answered 404. */
async function listenOps(
  at: { host: string; port: number },
  ops: (req: http.IncomingMessage, res: http.ServerResponse) => boolean,
): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    if (!ops(req, res)) send(res, 404, 'text/plain', 'not found')
  })
  // Probes and scrapers hold no long requests; a silent socket is dropped like on the rpc port.
  server.headersTimeout = 10_000
  server.requestTimeout = 310_000
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(at.port, at.host, () => resolve())
  })
  const port = (server.address() as AddressInfo).port
  log.info({ host: at.host, port }, 'ops endpoints listening')
  return {
    url: `http://${at.host.includes(':') ? `[${at.host}]` : at.host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}

function send(
  res: http.ServerResponse | http2.Http2ServerResponse,
  status: number,
  type: string,
  body: string,
): void {
  // Both response kinds share this surface; their overloads do not unify in TS.
  const r = res as http.ServerResponse
  r.writeHead(status, { 'content-type': type })
  r.end(body)
}

// The direct lane: the hottest unary rpcs (routes/index.ts directRoutes) answered straight off
// the HTTP/2 request, for the one wire the AppView uses on HTTP/2: gRPC, uncompressed protobuf.
// Connect's per-request machinery (async iterables, header objects, abort controllers and their
// DOMExceptions, reflection-driven encoding) costs more CPU than a fan-out timeline read itself;
// here a request is one buffer in, one frame out. Everything else (other methods, HTTP/1.1,
// gRPC-web, Connect, compressed messages) goes to Connect unchanged. The lane keeps the guard's
// contract: same metrics, request limits, deadline and error answers.
import type http from 'node:http'
import type http2 from 'node:http2'
import { Code, ConnectError } from '@connectrpc/connect'
import type { Admission } from './admission.ts'
import { checkRequest } from './errors.ts'
import type { DirectRoute } from './routes/index.ts'
import { overloaded } from './routes/util/overloaded.ts'

/** Ends an rpc's timer under its answer code. */
export type EndRpc = (labels: { code: string }) => void

/** Records a failed rpc and returns the answer its caller gets. */
export type RpcOutcome = (method: string, err: unknown, end: EndRpc) => ConnectError

export interface DirectLaneOptions {
  routes: ReadonlyMap<string, DirectRoute>
  maxRequestBytes: number
  maxListItems: number
  /** Says when to refuse new rpcs (resource_exhausted) for overload. */
  admission: Admission
  /** Starts an rpc's timer (the same histogram Connect's requests are timed in). */
  startTimer(method: string): EndRpc
  outcome: RpcOutcome
}

const GRPC_TYPES = new Set(['application/grpc', 'application/grpc+proto'])

/** grpc-timeout units, in ms. */
const TIMEOUT_UNITS: Record<string, number> = {
  H: 3_600_000,
  M: 60_000,
  S: 1000,
  m: 1,
  u: 0.001,
  n: 0.000001,
}

/** A request handler that takes the requests it serves (true) and leaves the rest (false). */
export function directLane(
  opts: DirectLaneOptions,
): (
  req: http.IncomingMessage | http2.Http2ServerRequest,
  res: http.ServerResponse | http2.Http2ServerResponse,
) => boolean {
  return (req, res) => {
    if (req.httpVersionMajor !== 2 || req.method !== 'POST') return false
    const route = opts.routes.get(req.url ?? '')
    if (!route) return false
    const type = req.headers['content-type']
    if (!type || !GRPC_TYPES.has(type)) return false
    const encoding = req.headers['grpc-encoding']
    if (encoding && encoding !== 'identity') return false
    serve(route, req as http2.Http2ServerRequest, res as http2.Http2ServerResponse, type, opts)
    return true
  }
}

function serve(
  route: DirectRoute,
  req: http2.Http2ServerRequest,
  res: http2.Http2ServerResponse,
  contentType: string,
  opts: DirectLaneOptions,
): void {
  const end = opts.startTimer(route.name)
  let done = false
  let timer: NodeJS.Timeout | undefined
  const finish = (frame: Uint8Array | undefined, err?: unknown) => {
    if (done) return
    done = true
    clearTimeout(timer)
    if (res.destroyed || res.stream.closed) {
      // The caller went away first: its answer has nowhere to go.
      end({ code: Code[Code.Canceled] })
      return
    }
    if (frame) {
      end({ code: 'ok' })
      res.writeHead(200, { 'content-type': contentType })
      res.addTrailers({ 'grpc-status': '0' })
      res.end(frame)
      return
    }
    const error = opts.outcome(route.name, err, end)
    // Trailers-only: the status in the one header block, no message.
    res.writeHead(200, {
      'content-type': contentType,
      'grpc-status': String(error.code),
      'grpc-message': encodeURIComponent(error.rawMessage),
    })
    res.end()
  }
  if (opts.admission.shed()) {
    // Refused before its body is read: the cheapest answer the process can give.
    finish(undefined, overloaded())
    return
  }
  const timeoutMs = parseTimeout(req.headers['grpc-timeout'])
  if (timeoutMs !== undefined) {
    timer = setTimeout(
      () => finish(undefined, new ConnectError('the operation timed out', Code.DeadlineExceeded)),
      timeoutMs,
    )
  }
  // Closed before the answer: the caller cancelled (or its deadline passed on its side).
  req.once('close', () =>
    finish(undefined, new ConnectError('the caller cancelled the request', Code.Canceled)),
  )
  const chunks: Buffer[] = []
  let size = 0
  req.on('data', (chunk: Buffer) => {
    size += chunk.length
    if (size > opts.maxRequestBytes) {
      finish(
        undefined,
        new ConnectError(
          `message size is larger than configured readMaxBytes ${opts.maxRequestBytes}`,
          Code.ResourceExhausted,
        ),
      )
      req.pause()
      return
    }
    chunks.push(chunk)
  })
  req.once('end', () => {
    if (done) return
    const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)
    let message
    try {
      message = decodeEnvelope(route, body, opts.maxListItems)
    } catch (err) {
      finish(undefined, err)
      return
    }
    route.answer(message).then(
      (frame) => finish(frame),
      (err: unknown) => finish(undefined, err),
    )
  })
}

/** The one message of a unary gRPC request body; invalid_argument for anything else. */
function decodeEnvelope(route: DirectRoute, body: Buffer, maxListItems: number) {
  if (body.length < 5) throw new ConnectError('missing request message', Code.InvalidArgument)
  if (body[0] !== 0) {
    // Compressed or otherwise flagged: this lane (and the AppView) uses no compression.
    throw new ConnectError('compressed messages are not accepted', Code.InvalidArgument)
  }
  const length = body.readUInt32BE(1)
  if (length !== body.length - 5) {
    throw new ConnectError('expected exactly one request message', Code.InvalidArgument)
  }
  let message
  try {
    message = route.decode(body.subarray(5))
  } catch (err) {
    throw new ConnectError(
      `failed to decode the request: ${err instanceof Error ? err.message : String(err)}`,
      Code.InvalidArgument,
    )
  }
  const refused = checkRequest(message, maxListItems)
  if (refused) throw refused
  return message
}

/** A grpc-timeout header's deadline in ms; undefined when absent or malformed (no deadline). */
function parseTimeout(header: string | string[] | undefined): number | undefined {
  if (typeof header !== 'string') return undefined
  const m = /^(\d{1,8})([HMSmun])$/.exec(header)
  if (!m) return undefined
  return Number(m[1]) * TIMEOUT_UNITS[m[2]!]!
}

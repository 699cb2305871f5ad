// The direct lane: the unary rpcs (direct-routes.ts) answered straight off the HTTP/2 stream,
// for the one wire the AppView uses on HTTP/2: gRPC, uncompressed protobuf.
// Connect's per-request machinery (async iterables, header objects, abort controllers and their
// DOMExceptions, reflection-driven encoding) costs more CPU than a fan-out timeline read itself,
// and so do Node's HTTP/2 compatibility objects (a Readable request and a response per call);
// here a request is one buffer in, one frame out, on the stream itself. Everything else (other
// methods, HTTP/1.1, gRPC-web, Connect, compressed messages) goes to Connect unchanged. The lane
// keeps the guard's contract: same metrics, request limits, deadline and error answers.
import http2 from 'node:http2'
import { Code, ConnectError } from '@connectrpc/connect'
import { shedTotal, type Admission } from './admission.ts'
import { checkRequest } from './errors.ts'
import type { DirectRoute } from './direct-routes.ts'
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
  /**
   * Reads of the bounded routes (GetTimeline) in progress at once; past it, new ones are refused
   * (resource_exhausted); 0: no bound. The event loop's delay only shows a backlog once it has
   * formed; this bounds how much work a burst can queue, so what is accepted is answered within
   * about this many reads' time.
   */
  maxInFlight: number
  /**
   * Rpcs of any route in progress at once; past it, new ones are refused (resource_exhausted);
   * 0: no bound. Most rpcs wait on Postgres' pool, whose queue has no end of its own: past the
   * process's capacity they would wait there ever longer (seconds), without the event loop
   * lagging. Bounded, an accepted rpc waits behind at most this many.
   */
  maxRpcsInFlight: number
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

const { HTTP2_HEADER_METHOD, HTTP2_HEADER_PATH, HTTP2_HEADER_STATUS, HTTP2_HEADER_CONTENT_TYPE } =
  http2.constants

/** A stream handler that takes the streams it serves (true) and leaves the rest (false). */
export function directLane(
  opts: DirectLaneOptions,
): (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => boolean {
  const lane = { inFlight: 0, rpcs: 0 }
  return (stream, headers) => {
    if (headers[HTTP2_HEADER_METHOD] !== 'POST') return false
    const path = headers[HTTP2_HEADER_PATH]
    const route = typeof path === 'string' ? opts.routes.get(path) : undefined
    if (!route) return false
    const type = headers[HTTP2_HEADER_CONTENT_TYPE]
    if (typeof type !== 'string' || !GRPC_TYPES.has(type)) return false
    const encoding = headers['grpc-encoding']
    if (encoding && encoding !== 'identity') return false
    serve(route, stream, headers, type, opts, lane)
    return true
  }
}

function serve(
  route: DirectRoute,
  stream: http2.ServerHttp2Stream,
  headers: http2.IncomingHttpHeaders,
  contentType: string,
  opts: DirectLaneOptions,
  lane: { inFlight: number; rpcs: number },
): void {
  const end = opts.startTimer(route.name)
  let done = false
  let timer: NodeJS.Timeout | undefined
  // Only the bounded routes (the timeline reads) count against the in-flight bound: the others
  // mostly wait on Postgres, whose own pool bounds them.
  const counted = route.bounded === true
  if (counted) lane.inFlight++
  lane.rpcs++
  let released = false
  /** No longer in flight: its bounds' counts and its deadline end. */
  const release = () => {
    if (released) return
    released = true
    if (counted) lane.inFlight--
    lane.rpcs--
    clearTimeout(timer)
  }
  const finish = (frame: Uint8Array | undefined, err?: unknown) => {
    if (done) return
    done = true
    release()
    if (stream.destroyed || stream.closed) {
      // The caller went away first: its answer has nowhere to go.
      end({ code: Code[Code.Canceled] })
      return
    }
    if (frame) {
      end({ code: 'ok' })
      stream.respond(
        { [HTTP2_HEADER_STATUS]: 200, [HTTP2_HEADER_CONTENT_TYPE]: contentType },
        { waitForTrailers: true },
      )
      stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }))
      stream.end(frame)
      return
    }
    const error = opts.outcome(route.name, err, end)
    // Trailers-only: the status in the one header block, no message.
    stream.respond(
      {
        [HTTP2_HEADER_STATUS]: 200,
        [HTTP2_HEADER_CONTENT_TYPE]: contentType,
        'grpc-status': String(error.code),
        'grpc-message': encodeURIComponent(error.rawMessage),
      },
      { endStream: true },
    )
  }
  // A reset by the caller surfaces as an error on the stream; 'close' below answers it.
  stream.on('error', () => {})
  const full = counted && opts.maxInFlight > 0 && lane.inFlight > opts.maxInFlight
  const busy = opts.maxRpcsInFlight > 0 && lane.rpcs > opts.maxRpcsInFlight
  if (full || busy || opts.admission.shed()) {
    // Refused without decoding or running it: the cheapest answer the process can give. Out of
    // the bounds' counts at once; only the answer waits for the request to arrive whole.
    shedTotal.inc({ reason: full ? 'in_flight' : busy ? 'rpcs_in_flight' : 'loop_delay' })
    release()
    stream.once('close', () => finish(undefined))
    whenRead(stream, opts.maxRequestBytes, () => finish(undefined, overloaded()))
    return
  }
  const timeoutMs = parseTimeout(headers['grpc-timeout'])
  if (timeoutMs !== undefined) {
    timer = setTimeout(
      () => finish(undefined, new ConnectError('the operation timed out', Code.DeadlineExceeded)),
      timeoutMs,
    )
  }
  // Closed before the answer: the caller cancelled (or its deadline passed on its side). The
  // error is made only then: its stack trace costs more than the rest of a closing stream.
  stream.once('close', () => {
    if (!done)
      finish(undefined, new ConnectError('the caller cancelled the request', Code.Canceled))
  })
  const chunks: Buffer[] = []
  let size = 0
  stream.on('data', (chunk: Buffer) => {
    size += chunk.length
    if (size > opts.maxRequestBytes) {
      finish(
        undefined,
        new ConnectError(
          `message size is larger than configured readMaxBytes ${opts.maxRequestBytes}`,
          Code.ResourceExhausted,
        ),
      )
      stream.pause()
      return
    }
    chunks.push(chunk)
  })
  stream.once('end', () => {
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

/**
 * Calls `then` once the caller has sent its whole request (discarded), or more than `maxBytes` of
 * it. Answered before that, Node resets the stream (RST_STREAM NO_ERROR) while the caller is still
 * sending it; under a burst of refusals Node's HTTP/2 client (the AppView's) answers some of those
 * resets with its own (ENHANCE_YOUR_CALM, a call failed as `internal`), and once those pass
 * nghttp2's bound on incoming resets (1,000, then 33/s) the server closes the connection and every
 * call on it fails (bench:faults' overload: 2 % of the reads).
 */
function whenRead(stream: http2.ServerHttp2Stream, maxBytes: number, then: () => void): void {
  let size = 0
  const onData = (chunk: Buffer) => {
    size += chunk.length
    if (size <= maxBytes) return
    stream.off('data', onData)
    stream.pause()
    then()
  }
  stream.on('data', onData)
  stream.once('end', then)
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

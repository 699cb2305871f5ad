// The direct lane's route table (direct.ts serves it): every unary rpc Connect serves, by
// request path, answering with its whole gRPC frame. The routes return plain objects, as the
// stock's do; the frames are encoded here, by wire/: protobuf-es's bytes written from the plain
// answer (wire/message.ts), and GetTimeline's page written straight into its frame from the
// store's bytes (wire/timeline.ts, where a hand-written encoder pays: every home page).
import { MethodKind, type AnyMessage, type Message, type MessageType } from '@bufbuild/protobuf'
import type { HandlerContext } from '@connectrpc/connect'
import { GetTimelineRequest, Service } from '@openplane/proto'
import {
  buildRoutes,
  timelineAnswer,
  type RouteContext,
  type Routes,
  type UnaryRoute,
} from './routes/index.ts'
import { messageFrame } from './wire/message.ts'
import { timelineFrame } from './wire/timeline.ts'

/**
 * An rpc the direct lane (direct.ts) answers without Connect: it decodes the request and
 * returns the whole answer as a gRPC frame. Each is also served by its Connect route, with the
 * same answer.
 */
export interface DirectRoute {
  /** The method's name, as metrics and logs give it. */
  name: string
  /** The request message; throws on bytes that are not one. */
  decode(bytes: Uint8Array): Message
  answer(req: Message): Promise<Uint8Array>
  /**
   * Counted against the lane's in-flight bound (DATAPLANE_MAX_TIMELINE_READS): reads whose work
   * is this process's CPU and Redis, where a burst queues inside the process.
   */
  bounded?: boolean
}

/** A direct route for a method whose request type is `input`. */
export function directRoute<I extends Message<I>>(
  name: string,
  input: MessageType<I>,
  answer: (req: I) => Promise<Uint8Array>,
  bounded = false,
): DirectRoute {
  return {
    name,
    decode: (bytes) => input.fromBinary(bytes),
    answer: (req) => answer(req as I),
    bounded,
  }
}

/**
 * The rpcs the direct lane answers, by request path: every implemented unary method, so the
 * AppView's calls (gRPC over HTTP/2) skip Connect's per-request machinery, which cost more CPU
 * than most of the reads themselves. `impl` is the routes Connect serves, so both lanes answer
 * alike.
 */
export function directRoutes(
  ctx: RouteContext,
  impl: Routes = buildRoutes(ctx),
): Map<string, DirectRoute> {
  const path = (name: string) => `/${Service.typeName}/${name}`
  const routes = new Map<string, DirectRoute>()
  for (const [local, method] of Object.entries(Service.methods)) {
    const route = (impl as Record<string, UnaryRoute | undefined>)[local]
    if (!route || method.kind !== MethodKind.Unary) continue
    const input = method.I as MessageType<AnyMessage>
    const output = method.O as MessageType<AnyMessage>
    routes.set(
      path(method.name),
      directRoute(method.name, input, async (req) =>
        messageFrame(output, await route(req, NO_CONTEXT)),
      ),
    )
  }
  const getTimeline = Service.methods.getTimeline.name
  routes.set(
    path(getTimeline),
    directRoute(
      getTimeline,
      GetTimelineRequest,
      async (req) => timelineFrame(await timelineAnswer(ctx, req)),
      true,
    ),
  )
  return routes
}

/**
 * No route reads its handler context (deadlines and cancellation are the lanes' own work), so
 * the direct lane has none to give.
 */
const NO_CONTEXT = undefined as unknown as HandlerContext

// The run's control endpoint (HTTP on 127.0.0.1):
//   POST /scenarios {"scenario_name", "path"}  join a scenario at the current runtime offset
//   GET  /plan                                 the effective plan (original + joined entries)
//   GET  /status                               counters and offsets as JSON
//   POST /stop                                 end the run now (the report is still written)
//   GET  /metrics                              the run's Prometheus metrics (sim_*)
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Registry } from 'prom-client'
import { Fields, ParamError, parseJson } from '../validate.ts'

export interface ControlHandlers {
  /** Adds a scenario file (path relative to the runner's working directory) to the run. */
  join(scenarioName: string, file: string): Promise<unknown>
  plan(): unknown
  status(): unknown
  stop(): void
  registry: Registry
}

export interface ControlServer {
  url: string
  port: number
  close(): Promise<void>
}

/** Thrown by a handler when the request is valid but the run cannot take it (e.g. it ended). */
export class ConflictError extends Error {
  override name = 'ConflictError'
}

const MAX_BODY = 64 * 1024

export async function startControlServer(
  handlers: ControlHandlers,
  opts: { port: number; host?: string },
): Promise<ControlServer> {
  const server = http.createServer((req, res) => {
    handle(handlers, req, res).catch((err: unknown) => {
      const status = err instanceof ParamError ? 400 : err instanceof ConflictError ? 409 : 500
      send(res, status, { error: err instanceof Error ? err.message : String(err) })
    })
  })
  const host = opts.host ?? '127.0.0.1'
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(opts.port, host, () => {
      server.off('error', reject)
      resolve()
    })
  })
  const port = (server.address() as AddressInfo).port
  return {
    port,
    url: `http://${host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}

async function handle(
  h: ControlHandlers,
  req: http.IncomingMessage,
  res: http.ServerResponse,
): Promise<void> {
  const route = `${req.method} ${(req.url ?? '/').split('?')[0]}`
  switch (route) {
    case 'POST /scenarios': {
      const f = new Fields('request', parseJson(await body(req), 'request body'))
      const name = f.string('scenario_name')
      const file = f.string('path')
      f.done()
      return send(res, 201, await h.join(name, file))
    }
    case 'GET /plan':
      return send(res, 200, h.plan())
    case 'GET /status':
      return send(res, 200, h.status())
    case 'POST /stop':
      h.stop()
      return send(res, 202, { stopping: true })
    case 'GET /metrics': {
      const text = await h.registry.metrics()
      res.writeHead(200, { 'content-type': h.registry.contentType })
      res.end(text)
      return
    }
    default:
      return send(res, 404, {
        error: `no route ${route}; try POST /scenarios, GET /plan, GET /status, POST /stop, GET /metrics`,
      })
  }
}

async function body(req: http.IncomingMessage): Promise<string> {
  let text = ''
  for await (const chunk of req) {
    text += String(chunk)
    if (text.length > MAX_BODY)
      throw new ParamError(`request body is larger than ${MAX_BODY} bytes`)
  }
  return text
}

function send(res: http.ServerResponse, status: number, value: unknown): void {
  if (res.headersSent) return
  res.writeHead(status, { 'content-type': 'application/json' })
  res.end(`${JSON.stringify(value, null, 2)}\n`)
}

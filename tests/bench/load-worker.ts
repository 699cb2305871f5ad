// The read benchmarks' load generator, a worker thread of the bench process (load-generator.ts
// starts it). It has its own small heap: the bench process itself holds the AppView's whole
// module graph (@atproto/bsky alone is about 66 MB of heap), and a generator sharing that heap
// paid 5–35 ms major GCs in every step, counted as the server's latency. Here it loads only the
// client it drives (imported when it starts), and the lean client's requests come encoded.
import { parentPort, workerData } from 'node:worker_threads'
import { readAll, sequential, step, type Read, type StepResult } from './open-loop.ts'

/** The client a generator drives; each answers one request per reader. */
export type Driver =
  /**
   * GetTimeline through the lean HTTP/2 client (grpc-h2.ts), `sessions` per url; `frames[i]` is
   * reader i's request (timelineRequestFrame).
   */
  | { kind: 'h2'; urls: string[]; sessions: number; frames: Uint8Array[] }
  /**
   * GetTimeline through the transport the AppView's dataplane client is built on (connect-node's
   * gRPC transport, no compression; without its telemetry interceptors), calls spread over the
   * urls in turn.
   */
  | { kind: 'grpc'; urls: string[]; httpVersion: '1.1' | '2' }
  /** app.bsky.feed.getTimeline (limit 50) through an AppView, with each viewer's service token. */
  | { kind: 'appview'; url: string; tokens: [viewer: string, token: string][] }

export interface WorkerInput {
  driver: Driver
  readers: string[]
}

export type Request =
  | { id: number; op: 'all' }
  | { id: number; op: 'sequential'; n: number }
  | { id: number; op: 'step'; rate: number; seconds: number }
  | { id: number; op: 'close' }

export type Reply =
  { id: number; result: number | StepResult | null } | { id: number; error: string }

async function reader(driver: Driver, readers: string[]): Promise<{ read: Read; close(): void }> {
  switch (driver.kind) {
    case 'h2': {
      const { rawGrpcClient } = await import('./grpc-h2.ts')
      const client = rawGrpcClient(driver.urls, driver.sessions)
      const frames = new Map(readers.map((r, i) => [r, Buffer.from(driver.frames[i]!)]))
      return { read: (r) => client.getTimeline(frames.get(r)!), close: () => client.close() }
    }
    case 'grpc': {
      const [{ createPromiseClient }, { createGrpcTransport }, { Service }] = await Promise.all([
        import('@connectrpc/connect'),
        import('@connectrpc/connect-node'),
        import('@openplane/proto'),
      ])
      const clients = driver.urls.map((baseUrl) =>
        createPromiseClient(
          Service,
          createGrpcTransport({ baseUrl, httpVersion: driver.httpVersion, acceptCompression: [] }),
        ),
      )
      let next = 0
      return {
        read: (r) =>
          clients[next++ % clients.length]!.getTimeline({ actorDid: r, limit: 50, cursor: '' }),
        close: () => {},
      }
    }
    case 'appview': {
      const tokens = new Map(driver.tokens)
      const url = `${driver.url}/xrpc/app.bsky.feed.getTimeline?limit=50`
      return {
        read: async (viewer) => {
          const res = await fetch(url, {
            headers: { authorization: `Bearer ${tokens.get(viewer)}` },
          })
          const body = await res.arrayBuffer()
          if (res.status !== 200) {
            throw new Error(
              `getTimeline ${res.status}: ${Buffer.from(body).toString().slice(0, 200)}`,
            )
          }
        },
        close: () => {},
      }
    }
  }
}

if (parentPort) {
  const port = parentPort
  const { driver, readers } = workerData as WorkerInput
  const { read, close } = await reader(driver, readers)
  port.on('message', (req: Request) => {
    const run = async (): Promise<number | StepResult | null> => {
      switch (req.op) {
        case 'all':
          await readAll(read, readers)
          return null
        case 'sequential':
          return sequential(read, readers, req.n)
        case 'step':
          return step(read, readers, req.rate, req.seconds)
        case 'close':
          close()
          return null
      }
    }
    run().then(
      (result) => port.postMessage({ id: req.id, result } satisfies Reply),
      (err: unknown) => port.postMessage({ id: req.id, error: String(err) } satisfies Reply),
    )
  })
}

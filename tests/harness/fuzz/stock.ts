// The stock indexer as the fuzzer's reference: @atproto/bsky's RepoSubscription, unmodified,
// reading a relay that hands it one frame at a time. The next frame goes out only once the
// previous one is fully processed (its handler and the background recounts it queued), so the
// stock's per-repo concurrency cannot race and its answer is deterministic. The stock dataplane
// serves the same schema for the timeline comparison.
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import {
  BasicHostList,
  Database,
  DataPlaneServer,
  RepoSubscription,
  createDataPlaneClient,
} from '@atproto/bsky'
import { IdResolver } from '@atproto/identity'
import { WebSocketServer, type WebSocket } from 'ws'
import { PG_URL, uniqueName } from '../env.ts'
import { freePort } from '../processes.ts'
import { dropSchemas } from '../stock-network.ts'
import { wellKnown } from '../well-known.ts'
import { clearSchema } from './schema.ts'

export type StockClient = ReturnType<typeof createDataPlaneClient>
type Relay = { socket: () => Promise<WebSocket>; close: () => Promise<void> }

export class StockIndexer {
  readonly schema: string
  readonly client: StockClient
  /** The stock dataplane's URL (HTTP/1.1), for a stock AppView on it. */
  readonly url: string
  private readonly db: Database
  private readonly sub: RepoSubscription
  private readonly server: DataPlaneServer
  private readonly relay: Relay
  /** Calls into the stock's indexing service still running. */
  private readonly pending: Set<Promise<unknown>>

  private constructor(
    schema: string,
    db: Database,
    sub: RepoSubscription,
    server: DataPlaneServer,
    relay: Relay,
    client: StockClient,
    pending: Set<Promise<unknown>>,
    url: string,
  ) {
    this.url = url
    this.pending = pending
    this.schema = schema
    this.db = db
    this.sub = sub
    this.server = server
    this.relay = relay
    this.client = client
  }

  /** `worldUrl` serves PLC; handles resolve at `handlesUrl` (default: the same). */
  static async start(worldUrl: string, handlesUrl = worldUrl): Promise<StockIndexer> {
    const schema = uniqueName('fuzz_stock')
    const db = new Database({ url: PG_URL, schema, poolSize: 4 })
    await db.migrateToLatestOrThrow()
    const relay = await steppingRelay()
    const idResolver = new IdResolver({ plcUrl: worldUrl, fetch: globalThis.fetch })
    idResolver.handle.resolve = (handle: string) => wellKnown(handlesUrl, handle)
    const sub = new RepoSubscription({ service: relay.url, db, idResolver })
    const pending = watchIndexing(sub)
    await sub.start()
    const port = await freePort()
    const server = await DataPlaneServer.create(db, port, worldUrl, globalThis.fetch)
    const url = `http://127.0.0.1:${port}`
    const client = createDataPlaneClient(new BasicHostList([url]), { httpVersion: '1.1' })
    return new StockIndexer(schema, db, sub, server, relay, client, pending, url)
  }

  /** Plays frames one at a time, each fully processed before the next is sent. */
  async play(frames: { seq: number; bytes: Uint8Array }[]): Promise<void> {
    const ws = await this.relay.socket()
    for (const f of frames) {
      ws.send(f.bytes)
      const deadline = Date.now() + 20_000
      while ((this.sub.getCursor() ?? 0) < f.seq) {
        await this.sub.processAll()
        if ((this.sub.getCursor() ?? 0) >= f.seq) break
        if (Date.now() > deadline) throw new Error(`stock indexer never reached seq ${f.seq}`)
        await new Promise((r) => setImmediate(r))
      }
      await this.sub.processAll()
      await this.settled()
    }
  }

  /**
   * The stock's handler runs the handle check beside the record (Promise.all): when the record
   * fails, the handler returns while the check goes on, and the next event could race it. Every
   * call into the stock's indexing service is watched (not changed), and the next frame waits
   * for all of them and the recounts they queued, as the stock's per-event order intends.
   */
  private async settled(): Promise<void> {
    while (this.pending.size) {
      await Promise.allSettled([...this.pending])
      await this.sub.processAll()
    }
  }

  reset(): Promise<void> {
    return clearSchema(this.schema)
  }

  async close(): Promise<void> {
    await this.sub.destroy()
    await this.server.destroy()
    await this.relay.close()
    await this.db.close()
    await dropSchemas([this.schema])
  }
}

/** A subscribeRepos endpoint that sends whatever it is given, to its one subscriber. */
async function steppingRelay(): Promise<Relay & { url: string }> {
  const server = http.createServer((_, res) => res.writeHead(404).end())
  const wss = new WebSocketServer({ server, path: '/xrpc/com.atproto.sync.subscribeRepos' })
  let current: WebSocket | undefined
  const waiting: ((ws: WebSocket) => void)[] = []
  wss.on('connection', (ws) => {
    current = ws
    for (const w of waiting.splice(0)) w(ws)
    ws.on('close', () => {
      if (current === ws) current = undefined
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()))
  return {
    url: `ws://127.0.0.1:${(server.address() as AddressInfo).port}`,
    socket: () =>
      current ? Promise.resolve(current) : new Promise<WebSocket>((r) => waiting.push(r)),
    close: () =>
      new Promise<void>((r) => {
        for (const c of wss.clients) c.terminate()
        wss.close()
        server.close(() => r())
      }),
  }
}

/** Wraps the indexing service's entry points so each call's promise is tracked until it ends. */
function watchIndexing(sub: RepoSubscription): Set<Promise<unknown>> {
  const pending = new Set<Promise<unknown>>()
  const svc = sub.indexingSvc as unknown as Record<string, (...args: unknown[]) => unknown>
  for (const name of [
    'indexRecord',
    'deleteRecord',
    'indexHandle',
    'deleteActor',
    'updateActorStatus',
    'setCommitLastSeen',
  ]) {
    const original = svc[name]!.bind(svc)
    svc[name] = (...args: unknown[]) => {
      const call = Promise.resolve(original(...args))
      pending.add(call)
      void call.catch(() => undefined).finally(() => pending.delete(call))
      return call
    }
  }
  return pending
}

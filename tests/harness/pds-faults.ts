// A fault proxy in front of a real PDS's getRepo, for tests of repos that cannot be fetched:
// per DID it answers 404 RepoNotFound, 429 with Retry-After, 500, nothing at all, or passes the
// request to the PDS; or the DID's PDS is a port nothing listens on. The backfill finds it
// through the DID document: a real resolver whose documents name the proxy as the PDS.
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import type { IdResolver } from '@atproto/identity'
import { freePort } from './processes.ts'

export type PdsFault = '404' | '429' | '500' | 'silence' | 'unreachable' | 'pass'

export interface PdsFaults {
  url: string
  /** How getRepo answers for a DID now (default: pass). */
  modes: Map<string, PdsFault>
  /** getRepo requests per DID. */
  requests: Map<string, number>
  /** Makes the resolver's DID documents name this proxy (or a dead port) as the PDS. */
  redirect(resolver: IdResolver): void
  close(): Promise<void>
}

export async function startPdsFaults(pdsUrl: string): Promise<PdsFaults> {
  const modes = new Map<string, PdsFault>()
  const requests = new Map<string, number>()
  const hung: http.ServerResponse[] = []
  const server = http.createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://x')
    const did = u.searchParams.get('did') ?? ''
    requests.set(did, (requests.get(did) ?? 0) + 1)
    const json = (status: number, error: string, headers: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': 'application/json', ...headers })
      res.end(JSON.stringify({ error, message: 'injected' }))
    }
    switch (modes.get(did) ?? 'pass') {
      case '404':
        return json(404, 'RepoNotFound')
      case '429':
        return json(429, 'RateLimitExceeded', { 'retry-after': '1' })
      case '500':
        return json(500, 'InternalServerError')
      case 'silence':
        hung.push(res)
        return
      default:
        void fetch(new URL(req.url ?? '/', pdsUrl)).then(
          async (up) => {
            res.writeHead(up.status, {
              'content-type': up.headers.get('content-type') ?? 'application/octet-stream',
            })
            res.end(Buffer.from(await up.arrayBuffer()))
          },
          () => json(502, 'BadGateway'),
        )
    }
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const dead = `http://127.0.0.1:${await freePort()}`
  return {
    url,
    modes,
    requests,
    redirect(resolver) {
      const resolve = resolver.did.ensureResolve.bind(resolver.did)
      resolver.did.ensureResolve = async (did, forceRefresh) => {
        const doc = await resolve(did, forceRefresh)
        const endpoint = modes.get(did) === 'unreachable' ? dead : url
        const service = [
          { id: '#atproto_pds', type: 'AtprotoPersonalDataServer', serviceEndpoint: endpoint },
        ]
        return { ...doc, service }
      }
    },
    async close() {
      for (const res of hung) res.destroy()
      server.closeAllConnections()
      await new Promise<void>((r) => server.close(() => r()))
    },
  }
}

// The fetch floor of a backfill run: what it costs on this machine only to fetch what a backfill
// of these repos must fetch — each repo's DID document, its handle's well-known answer (the
// actor's handle is checked when its row is written) and its CAR — with the same number of
// repos in flight, the bodies read and dropped, nothing decoded or written. Every backfill that
// fetches these repos from this server pays at least this much CPU, in its own process and the
// server's, so with Postgres's floor it bounds the records/s any backfill can reach here.
import http from 'node:http'
import { performance } from 'node:perf_hooks'
import { processCpu } from './proc.ts'

export interface FetchFloor {
  repos: number
  seconds: number
  /** CPU seconds of this process over the fetches. */
  clientCpu: number
  /** CPU seconds of the server process over the fetches. */
  serverCpu: number
}

export async function fetchFloor(
  httpUrl: string,
  dids: readonly string[],
  concurrency: number,
  serverPid: number,
): Promise<FetchFloor> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency })
  const get = (path: string, host?: string) =>
    new Promise<string>((resolve, reject) => {
      const req = http.get(
        new URL(path, httpUrl),
        { agent, headers: host ? { host } : {} },
        (res) => {
          const chunks: Buffer[] = []
          res.on('data', (d: Buffer) => chunks.push(d))
          res.on('end', () =>
            resolve(res.statusCode === 200 ? Buffer.concat(chunks).toString('latin1') : ''),
          )
          res.on('error', reject)
        },
      )
      req.on('error', reject)
    })
  const cpu0 = process.cpuUsage()
  const server0 = processCpu(serverPid)
  const t0 = performance.now()
  let next = 0
  const worker = async () => {
    while (next < dids.length) {
      const did = dids[next++]!
      const doc = JSON.parse(await get(`/${did}`)) as { alsoKnownAs?: string[] }
      const handle = doc.alsoKnownAs?.[0]?.replace(/^at:\/\//, '')
      if (handle) await get('/.well-known/atproto-did', handle)
      await get(`/xrpc/com.atproto.sync.getRepo?did=${encodeURIComponent(did)}`)
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker))
  const seconds = (performance.now() - t0) / 1000
  const cpu = process.cpuUsage(cpu0)
  agent.destroy()
  return {
    repos: dids.length,
    seconds,
    clientCpu: (cpu.user + cpu.system) / 1e6,
    serverCpu: processCpu(serverPid) - server0,
  }
}

// Handle → DID through a PDS's /.well-known/atproto-did, chosen by the Host header (as dev-env's
// resolvers do): simulated and test handles have no DNS.
import http from 'node:http'

export function wellKnown(pdsUrl: string, handle: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    const req = http.get(
      `${pdsUrl}/.well-known/atproto-did`,
      { headers: { host: handle } },
      (res) => {
        let body = ''
        res.on('data', (d: Buffer) => (body += d.toString()))
        res.on('end', () => resolve(res.statusCode === 200 ? body.trim() : undefined))
      },
    )
    req.on('error', () => resolve(undefined))
  })
}

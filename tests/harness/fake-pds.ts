// A PDS and PLC for fault tests of the backfill: each account's getRepo answers as its script
// says (a real signed repo CAR, or garbage, a 5xx, a 429, silence, a cut body), and the DID
// documents point at this server. Real repos are built with @atproto/repo and signed with
// secp256k1 keys, so the backfill's parsing and verification run as against a real PDS.
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { Secp256k1Keypair } from '@atproto/crypto'
import { blocksToCarFile, MemoryBlockstore, Repo, WriteOpAction } from '@atproto/repo'

/** One answer to one getRepo request. */
export type Answer =
  | { kind: 'repo' }
  | { kind: 'bytes'; body: Uint8Array }
  | { kind: 'status'; status: number; error?: string; headers?: Record<string, string> }
  | { kind: 'silence' }
  | { kind: 'cut' }

export interface FakeAccount {
  did: string
  /** Answers in turn; the last one repeats. */
  script: Answer[]
  /** Sign the repo with another key than the DID document names. */
  wrongKey?: boolean
  posts?: number
}

export interface FakePds {
  url: string
  /** getRepo requests per DID, with their times. */
  requests: Map<string, number[]>
  close(): Promise<void>
}

async function buildCar(did: string, posts: number, sign: Secp256k1Keypair): Promise<Uint8Array> {
  const storage = new MemoryBlockstore()
  const writes = Array.from({ length: posts }, (_, i) => ({
    action: WriteOpAction.Create as const,
    collection: 'app.bsky.feed.post' as const,
    rkey: `3kaaaaaaaa${String(i).padStart(3, '2')}`,
    record: { $type: 'app.bsky.feed.post', text: `post ${i}`, createdAt: new Date().toISOString() },
  }))
  const repo = await Repo.create(storage, did, sign, writes)
  return blocksToCarFile(repo.cid, storage.blocks)
}

export async function startFakePds(accounts: FakeAccount[]): Promise<FakePds> {
  const requests = new Map<string, number[]>()
  const keys = new Map<string, Secp256k1Keypair>()
  const cars = new Map<string, Uint8Array>()
  for (const a of accounts) {
    const key = await Secp256k1Keypair.create()
    keys.set(a.did, key)
    const signer = a.wrongKey ? await Secp256k1Keypair.create() : key
    cars.set(a.did, await buildCar(a.did, a.posts ?? 2, signer))
  }
  const byDid = new Map(accounts.map((a) => [a.did, a]))
  const hung: http.ServerResponse[] = []
  let url = ''
  const server = http.createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://x')
    const path = decodeURIComponent(u.pathname)
    if (path.startsWith('/did:')) {
      const did = path.slice(1)
      const key = keys.get(did)
      if (!key) return void res.writeHead(404).end()
      res.writeHead(200, { 'content-type': 'application/json' })
      return void res.end(
        JSON.stringify({
          id: did,
          alsoKnownAs: [],
          verificationMethod: [
            {
              id: `${did}#atproto`,
              type: 'Multikey',
              controller: did,
              publicKeyMultibase: key.did().replace('did:key:', ''),
            },
          ],
          service: [
            { id: '#atproto_pds', type: 'AtprotoPersonalDataServer', serviceEndpoint: url },
          ],
        }),
      )
    }
    if (u.pathname !== '/xrpc/com.atproto.sync.getRepo') return void res.writeHead(404).end()
    const did = u.searchParams.get('did') ?? ''
    const account = byDid.get(did)
    const seen = requests.get(did) ?? []
    seen.push(Date.now())
    requests.set(did, seen)
    if (!account) return void res.writeHead(400).end(JSON.stringify({ error: 'RepoNotFound' }))
    const answer = account.script[Math.min(seen.length, account.script.length) - 1]!
    const car = cars.get(did)!
    switch (answer.kind) {
      case 'repo':
        res.writeHead(200, { 'content-type': 'application/vnd.ipld.car' })
        return void res.end(car)
      case 'bytes':
        res.writeHead(200, { 'content-type': 'application/vnd.ipld.car' })
        return void res.end(answer.body)
      case 'status':
        res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers })
        return void res.end(JSON.stringify({ error: answer.error ?? 'Error', message: 'scripted' }))
      case 'silence':
        hung.push(res)
        return
      case 'cut':
        // Headers and half the CAR, then nothing more.
        res.writeHead(200, { 'content-type': 'application/vnd.ipld.car' })
        res.write(car.subarray(0, Math.floor(car.length / 2)))
        hung.push(res)
        return
    }
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return {
    url,
    requests,
    async close() {
      for (const res of hung) res.destroy()
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

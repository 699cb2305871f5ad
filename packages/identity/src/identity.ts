// DID and handle resolution: PLC / did:web for documents, DNS then HTTPS well-known for handles,
// both cached. A handle counts only if it resolves back to the DID (bidirectional check).
import { IdResolver, getDid, getHandle, type DidDocument } from '@atproto/identity'
import { BoundedDidCache } from './did-cache.ts'
import { KeptClient } from './kept-client.ts'
import { checkedByHand, KeptPlcResolver } from './plc-resolver.ts'

export interface IdentityOptions {
  plcUrl: string
  /** Resolve handles ending in one of these suffixes via this PDS's /.well-known/atproto-did. */
  testHandles?: { suffixes: string[]; pdsUrl: string }
  /** Allow resolving against private addresses (local PLC/PDS); off in production. */
  allowPrivateNetwork?: boolean
  timeoutMs?: number
  didStaleMs?: number
  didMaxMs?: number
  handleTtlMs?: number
  /** DID documents, and handles, kept in memory at most (each; default 50,000). */
  cacheSize?: number
  /** Connections to the PLC directory at most (default 32); further lookups wait for one. */
  plcConnections?: number
}

export interface ResolvedIdentity {
  did: string
  /** The verified handle, lower-cased; `handle.invalid` when the document's claim does not verify. */
  handle: string
  doc: DidDocument
}

export interface Identity {
  /** The underlying resolver (commit signature checks need it). */
  idResolver: IdResolver
  resolveDidDoc(did: string, force?: boolean): Promise<DidDocument | null>
  resolveHandle(handle: string, force?: boolean): Promise<string | undefined>
  /** The document plus its handle checked both ways. */
  resolveDid(did: string, force?: boolean): Promise<ResolvedIdentity | null>
}

export type { DidDocument }

const INVALID = 'handle.invalid'
/**
 * Documents and handles kept in memory: the accounts active lately, not every account ever seen
 * (a document is about 1–2 KB as objects; 50,000 of them under 100 MB).
 */
const CACHE_SIZE = 50_000

export function createIdentity(opts: IdentityOptions): Identity {
  const timeout = opts.timeoutMs ?? 3000
  const resolver = new IdResolver({
    plcUrl: opts.plcUrl,
    timeout,
    didCache: new BoundedDidCache({
      max: opts.cacheSize ?? CACHE_SIZE,
      staleMs: opts.didStaleMs ?? 60 * 60_000,
      maxAgeMs: opts.didMaxMs ?? 24 * 60 * 60_000,
    }),
    ...(opts.allowPrivateNetwork ? { fetch: globalThis.fetch } : {}),
  })
  // The directory is the operator's choice: its documents come over kept connections
  // (kept-client.ts); did:web hosts and handles, named by the network, keep the guarded fetch.
  const plc = new KeptClient({ sockets: opts.plcConnections ?? 32 })
  resolver.did.methods.set('plc', new KeptPlcResolver(opts.plcUrl, timeout, plc))
  checkedByHand(resolver.did)
  const testHosts = opts.testHandles ? new KeptClient() : undefined
  const handleTtl = opts.handleTtlMs ?? 10 * 60_000
  const handles = new Map<string, { did: string | undefined; at: number }>()

  const resolveHandleUncached = async (handle: string): Promise<string | undefined> => {
    const test = opts.testHandles
    if (test && testHosts && test.suffixes.some((s) => handle.endsWith(s))) {
      return wellKnownViaHost(testHosts, test.pdsUrl, handle, timeout)
    }
    return resolver.handle.resolve(handle)
  }

  const resolveHandle = async (raw: string, force = false) => {
    const handle = raw.toLowerCase()
    const hit = handles.get(handle)
    if (!force && hit && Date.now() - hit.at < handleTtl) return hit.did
    const did = await resolveHandleUncached(handle)
    // The least recently resolved goes first.
    handles.delete(handle)
    handles.set(handle, { did, at: Date.now() })
    if (handles.size > (opts.cacheSize ?? CACHE_SIZE)) handles.delete(handles.keys().next().value!)
    return did
  }

  const resolveDidDoc = (did: string, force = false) => resolver.did.resolve(did, force)

  return {
    idResolver: resolver,
    resolveDidDoc,
    resolveHandle,
    async resolveDid(did, force = false) {
      const doc = await resolveDidDoc(did, force)
      if (!doc || getDid(doc) !== did) return null
      const claimed = getHandle(doc)?.toLowerCase()
      let handle = INVALID
      if (claimed) {
        const back = await resolveHandle(claimed, force).catch(() => undefined)
        if (back === did) handle = claimed
      }
      return { did, handle, doc }
    },
  }
}

// Test networks serve every handle from one PDS, selected by the Host header, as dev-env does.
async function wellKnownViaHost(
  client: KeptClient,
  pdsUrl: string,
  handle: string,
  timeoutMs: number,
): Promise<string | undefined> {
  const url = new URL('/.well-known/atproto-did', pdsUrl)
  try {
    const res = await client.get(url, {
      headers: { host: handle },
      timeoutMs,
    })
    const did = res.body.toString('utf8').trim()
    return res.status === 200 && did.startsWith('did:') ? did : undefined
  } catch {
    return undefined
  }
}

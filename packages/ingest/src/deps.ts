// The writer's network lookups, backed by the identity resolver.
import { getPds } from '@atproto/identity'
import type { Identity } from '@openplane/identity'

export interface WriterDeps {
  /** Verified handle for a DID (null if it does not verify), or undefined if unresolvable now. */
  resolveHandle(did: string, force: boolean): Promise<string | null | undefined>
  /** Whether the account's PDS still hosts the repo (false = really deleted). */
  isHosted(did: string): Promise<boolean>
}

export function writerDeps(identity: Identity, timeoutMs = 5000): WriterDeps {
  // One lookup per DID at a time: the writer asking for a DID the prefetch is already resolving
  // waits for that answer instead of asking the network again.
  const inFlight = new Map<string, Promise<string | null | undefined>>()
  const resolve = async (did: string, force: boolean) => {
    const id = await identity.resolveDid(did, force)
    if (!id) return undefined
    return id.handle === 'handle.invalid' ? null : id.handle
  }
  return {
    async resolveHandle(did, force) {
      const key = `${force ? 'force' : 'cached'} ${did}`
      const shared = inFlight.get(key)
      if (shared) {
        // A shared lookup that failed gets one more try of our own, as a lone caller would.
        const got = await shared.catch(() => undefined)
        return got !== undefined ? got : resolve(did, force)
      }
      const pending = resolve(did, force).finally(() => inFlight.delete(key))
      inFlight.set(key, pending)
      return pending
    },
    // An account event says "deleted"; believe it only when its PDS no longer has the repo.
    async isHosted(did) {
      const doc = await identity.resolveDidDoc(did, true)
      const pds = doc ? getPds(doc) : undefined
      if (!pds) return false
      const url = new URL('/xrpc/com.atproto.sync.getLatestCommit', pds)
      url.searchParams.set('did', did)
      const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) })
      if (res.ok) return true
      const body = (await res.json().catch(() => ({}))) as { error?: string }
      if (body.error === 'RepoNotFound') return false
      throw new Error(`getLatestCommit for ${did} answered ${res.status} ${body.error ?? ''}`)
    },
  }
}

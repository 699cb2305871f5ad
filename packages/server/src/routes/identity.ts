import { Timestamp } from '@bufbuild/protobuf'
import { Code, ConnectError } from '@connectrpc/connect'
import { lookupFailure, type DidDocument } from '@openplane/identity'
import type { RouteContext, Routes } from './context.ts'
import { isDid } from './util/at-uri.ts'

export default (ctx: RouteContext): Routes => ({
  async getIdentityByDid(req) {
    if (!isDid(req.did)) throw new ConnectError('did is not a DID', Code.InvalidArgument)
    const id = await lookup(() => ctx.identity.resolveDid(req.did))
    if (!id) throw new ConnectError('identity not found', Code.NotFound)
    return identityResponse(id.did, id.handle, id.doc)
  },

  async getIdentityByHandle(req) {
    if (!req.handle) throw new ConnectError('handle is required', Code.InvalidArgument)
    const did = await lookup(() => ctx.identity.resolveHandle(req.handle))
    if (!did) throw new ConnectError('identity not found', Code.NotFound)
    const id = await lookup(() => ctx.identity.resolveDid(did))
    if (!id || id.handle !== req.handle.toLowerCase()) {
      throw new ConnectError('identity not found', Code.NotFound)
    }
    return identityResponse(id.did, id.handle, id.doc)
  },
})

/** A lookup whose failure is not_found (no such identity) or unavailable, never internal. */
async function lookup<T>(resolve: () => Promise<T>): Promise<T> {
  try {
    return await resolve()
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err)
    if (lookupFailure(err) === 'not_found') {
      throw new ConnectError(`identity not found: ${message}`, Code.NotFound)
    }
    throw new ConnectError(`identity lookup failed: ${message}`, Code.Unavailable)
  }
}

// Keys and services travel as JSON maps keyed by fragment id, in the Go casing the AppView reads.
function identityResponse(did: string, handle: string, doc: DidDocument) {
  const keys: Record<string, { Type: string; PublicKeyMultibase: string }> = {}
  for (const m of doc.verificationMethod ?? []) {
    const id = m.id.split('#')[1]
    if (id) keys[id] = { Type: m.type, PublicKeyMultibase: m.publicKeyMultibase ?? '' }
  }
  const services: Record<string, { Type: string; URL: string }> = {}
  for (const s of doc.service ?? []) {
    const id = s.id.split('#')[1]
    if (id && typeof s.serviceEndpoint === 'string') {
      services[id] = { Type: s.type, URL: s.serviceEndpoint }
    }
  }
  return {
    did,
    handle,
    keys: Buffer.from(JSON.stringify(keys)),
    services: Buffer.from(JSON.stringify(services)),
    updated: Timestamp.fromDate(new Date()),
  }
}

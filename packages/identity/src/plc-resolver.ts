// DID documents from the PLC directory the operator names, over kept connections
// (kept-client.ts): what the stock resolver asks per lookup, less what costs more than the lookup
// itself: no fetch Response built around the body, and its timeout a timer cleared when the answer
// comes (KeptClient.get's timeoutMs).
// The document is checked by the DID resolver this serves (checkedByHand, did-document.ts).
import {
  DidPlcResolver,
  PoorlyFormattedDidDocumentError,
  type DidDocument,
  type DidResolver,
} from '@atproto/identity'
import { isDidDocument } from './did-document.ts'
import type { KeptClient } from './kept-client.ts'

export class KeptPlcResolver extends DidPlcResolver {
  private readonly client: KeptClient

  constructor(plcUrl: string, timeoutMs: number, client: KeptClient) {
    // No cache here: the DID resolver in front keeps one for every method.
    super(plcUrl, timeoutMs)
    this.client = client
  }

  override async resolveNoCheck(did: string): Promise<unknown> {
    const url = new URL(`/${encodeURIComponent(did)}`, this.plcUrl)
    const res = await this.client.get(url, {
      headers: { accept: 'application/did+ld+json,application/json' },
      timeoutMs: this.timeout,
    })
    // Positively not found, as against a failure to ask.
    if (res.status === 404) return null
    if (res.status < 200 || res.status > 299) {
      throw Object.assign(new Error(`PLC directory answered ${res.status}`), {
        status: res.status,
      })
    }
    return JSON.parse(res.body.toString('utf8')) as unknown
  }
}

/**
 * The resolver's documents checked by hand (did-document.ts) rather than by the schema's parse:
 * the same documents accepted and refused, at a fraction of the cost.
 */
export function checkedByHand(resolver: DidResolver): void {
  resolver.validateDidDoc = (did: string, val: unknown): DidDocument => {
    if (!isDidDocument(val) || val.id !== did) throw new PoorlyFormattedDidDocumentError(did, val)
    return val
  }
}

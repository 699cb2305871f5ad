// DID documents cached in memory, bounded. The resolver's own MemoryCache keeps every document
// it ever resolved until that DID is asked for again: an indexer that sees millions of accounts
// grows without end. This one holds at most `max` documents and forgets the least recently used.
import type { CacheResult, DidCache, DidDocument } from '@atproto/identity'

interface Entry {
  doc: DidDocument
  updatedAt: number
}

export class BoundedDidCache implements DidCache {
  /** Insertion order is recency: a hit moves its entry to the end. */
  private readonly entries = new Map<string, Entry>()
  private readonly max: number
  private readonly staleMs: number
  private readonly maxAgeMs: number

  constructor(opts: { max: number; staleMs: number; maxAgeMs: number }) {
    this.max = opts.max
    this.staleMs = opts.staleMs
    this.maxAgeMs = opts.maxAgeMs
  }

  get size(): number {
    return this.entries.size
  }

  async cacheDid(did: string, doc: DidDocument): Promise<void> {
    this.entries.delete(did)
    this.entries.set(did, { doc, updatedAt: Date.now() })
    if (this.entries.size > this.max) this.entries.delete(this.entries.keys().next().value!)
  }

  async refreshCache(did: string, getDoc: () => Promise<DidDocument | null>): Promise<void> {
    const doc = await getDoc()
    if (doc) await this.cacheDid(did, doc)
  }

  async checkCache(did: string): Promise<CacheResult | null> {
    const entry = this.entries.get(did)
    if (!entry) return null
    const now = Date.now()
    const expired = now > entry.updatedAt + this.maxAgeMs
    if (expired) {
      this.entries.delete(did)
    } else {
      this.entries.delete(did)
      this.entries.set(did, entry)
    }
    return {
      did,
      doc: entry.doc,
      updatedAt: entry.updatedAt,
      stale: now > entry.updatedAt + this.staleMs,
      expired,
    }
  }

  async clearEntry(did: string): Promise<void> {
    this.entries.delete(did)
  }

  async clear(): Promise<void> {
    this.entries.clear()
  }
}

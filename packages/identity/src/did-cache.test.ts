import type { DidDocument } from '@atproto/identity'
import { describe, expect, it, vi } from 'vitest'
import { BoundedDidCache } from './did-cache.ts'

const doc = (did: string): DidDocument => ({ id: did })

describe('BoundedDidCache', () => {
  it('holds at most `max` documents, forgetting the least recently used', async () => {
    const cache = new BoundedDidCache({ max: 3, staleMs: 60_000, maxAgeMs: 120_000 })
    for (const did of ['did:plc:a', 'did:plc:b', 'did:plc:c']) await cache.cacheDid(did, doc(did))
    // A hit makes `a` the most recent: `b` is the one to go.
    expect((await cache.checkCache('did:plc:a'))?.doc.id).toBe('did:plc:a')
    await cache.cacheDid('did:plc:d', doc('did:plc:d'))
    expect(cache.size).toBe(3)
    expect(await cache.checkCache('did:plc:b')).toBeNull()
    for (const did of ['did:plc:a', 'did:plc:c', 'did:plc:d']) {
      expect((await cache.checkCache(did))?.doc.id).toBe(did)
    }
    for (let i = 0; i < 1000; i++) await cache.cacheDid(`did:plc:x${i}`, doc(`did:plc:x${i}`))
    expect(cache.size).toBe(3)
  })

  it('says when a document is stale or expired, and drops an expired one', async () => {
    vi.useFakeTimers()
    try {
      const cache = new BoundedDidCache({ max: 10, staleMs: 1000, maxAgeMs: 5000 })
      await cache.cacheDid('did:plc:a', doc('did:plc:a'))
      expect(await cache.checkCache('did:plc:a')).toMatchObject({ stale: false, expired: false })
      vi.advanceTimersByTime(2000)
      expect(await cache.checkCache('did:plc:a')).toMatchObject({ stale: true, expired: false })
      await cache.refreshCache('did:plc:a', async () => doc('did:plc:a'))
      expect(await cache.checkCache('did:plc:a')).toMatchObject({ stale: false })
      vi.advanceTimersByTime(6000)
      expect(await cache.checkCache('did:plc:a')).toMatchObject({ expired: true })
      expect(cache.size).toBe(0)
      // A refresh that finds nothing keeps nothing.
      await cache.refreshCache('did:plc:b', async () => null)
      expect(await cache.checkCache('did:plc:b')).toBeNull()
    } finally {
      vi.useRealTimers()
    }
  })
})

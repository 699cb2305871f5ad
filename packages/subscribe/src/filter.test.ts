import { describe, expect, it } from 'vitest'
import { filterFromMessage, filterFromQuery, FilterError, makeFilter, wants } from './filter.ts'

const alice = 'did:plc:alice'
const bob = 'did:plc:bob'

describe('consumer filters', () => {
  it('passes everything when nothing is asked', () => {
    const f = filterFromQuery(new URLSearchParams())
    expect(wants(f, alice, 'app.bsky.feed.post', 10)).toBe(true)
    expect(wants(f, alice, null, 10)).toBe(true)
  })

  it('matches exact collections and prefixes; identity and account always pass', () => {
    const f = filterFromQuery(
      new URLSearchParams([
        ['wantedCollections', 'app.bsky.feed.post'],
        ['wantedCollections', 'app.bsky.graph.*'],
      ]),
    )
    expect(wants(f, alice, 'app.bsky.feed.post', 1)).toBe(true)
    expect(wants(f, alice, 'app.bsky.graph.follow', 1)).toBe(true)
    expect(wants(f, alice, 'app.bsky.feed.like', 1)).toBe(false)
    expect(wants(f, alice, 'app.bsky.graphx.follow', 1)).toBe(false)
    expect(wants(f, alice, null, 1)).toBe(true)
  })

  it('applies DIDs to every kind and the size limit to the JSON bytes', () => {
    const f = makeFilter({ dids: [alice], maxMessageBytes: 100 })
    expect(wants(f, alice, null, 100)).toBe(true)
    expect(wants(f, bob, null, 10)).toBe(false)
    expect(wants(f, alice, 'app.bsky.feed.post', 101)).toBe(false)
    // Unreadable or negative sizes mean no limit, as Jetstream reads them.
    expect(filterFromQuery(new URLSearchParams('maxMessageSizeBytes=-5')).maxMessageBytes).toBe(0)
    expect(filterFromQuery(new URLSearchParams('maxMessageSizeBytes=x')).maxMessageBytes).toBe(0)
  })

  it('gives equal filters equal keys, whatever the order', () => {
    const a = makeFilter({ collections: ['a.b.c', 'd.e.*'], dids: [alice, bob] })
    const b = makeFilter({ collections: ['d.e.*', 'a.b.c', 'a.b.c'], dids: [bob, alice] })
    expect(a.key).toBe(b.key)
    expect(makeFilter({}).key).not.toBe(a.key)
  })

  it('refuses invalid collections and DIDs, and too many of either', () => {
    expect(() => makeFilter({ collections: ['not a nsid'] })).toThrow(FilterError)
    expect(() => makeFilter({ collections: ['*'] })).toThrow(FilterError)
    expect(() => makeFilter({ dids: ['alice'] })).toThrow(FilterError)
    const many = Array.from({ length: 101 }, (_, i) => `app.test.c${i}`)
    expect(() => makeFilter({ collections: many })).toThrow(/too many/)
    const dids = Array.from({ length: 10_001 }, (_, i) => `did:plc:${i}`)
    expect(() => makeFilter({ dids })).toThrow(/too many/)
  })

  it('reads options_update messages and ignores other types', () => {
    const update = JSON.stringify({
      type: 'options_update',
      payload: { wantedCollections: ['app.bsky.feed.like'], wantedDids: [alice] },
    })
    const f = filterFromMessage(update)!
    expect(wants(f, alice, 'app.bsky.feed.like', 1)).toBe(true)
    expect(wants(f, alice, 'app.bsky.feed.post', 1)).toBe(false)
    expect(filterFromMessage(JSON.stringify({ type: 'other' }))).toBeUndefined()
    expect(() => filterFromMessage('{')).toThrow(FilterError)
    expect(() =>
      filterFromMessage(JSON.stringify({ type: 'options_update', payload: { wantedDids: 3 } })),
    ).toThrow(/wantedDids/)
  })
})

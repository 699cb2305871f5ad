import { describe, expect, it } from 'vitest'
import { indexedCollections, parseRecord, pluginFor, plugins } from './registry.ts'

// The collections the stock indexer has a plugin for, in the order it lists them (IndexingService).
// Collections of our own may follow them; none of these may go missing.
const STOCK = [
  'app.bsky.feed.post',
  'app.bsky.feed.threadgate',
  'app.bsky.feed.postgate',
  'app.bsky.feed.like',
  'app.bsky.feed.repost',
  'app.bsky.graph.follow',
  'app.bsky.actor.profile',
  'app.bsky.graph.list',
  'app.bsky.graph.listitem',
  'app.bsky.graph.referencelistoptout',
  'app.bsky.graph.listblock',
  'app.bsky.graph.block',
  'app.bsky.feed.generator',
  'app.bsky.graph.starterpack',
  'app.bsky.labeler.service',
  'app.bsky.graph.verification',
  'chat.bsky.actor.declaration',
  'com.germnetwork.declaration',
  'app.bsky.notification.declaration',
  'app.bsky.actor.status',
]

describe('registry', () => {
  it('has a plugin for every collection the stock indexes, each collection once', () => {
    const collections = plugins.map((p) => p.collection)
    expect(new Set(collections).size).toBe(collections.length)
    expect(collections.slice(0, STOCK.length)).toEqual(STOCK)
  })

  it('finds the plugin of each collection', () => {
    for (const plugin of plugins) expect(pluginFor(plugin.collection)).toBe(plugin)
    expect(pluginFor('app.bsky.feed.like')?.table).toBe('like')
    expect(pluginFor('app.bsky.actor.status')?.table).toBeNull()
  })

  it('answers every site.standard.* collection with a record-only plugin of that collection', () => {
    for (const nsid of [
      'site.standard.publication',
      'site.standard.document',
      'site.standard.x.y',
    ]) {
      const plugin = pluginFor(nsid)
      expect(plugin?.collection).toBe(nsid)
      expect(plugin?.table).toBeNull()
    }
  })

  it('has no plugin for a collection it does not index', () => {
    expect(pluginFor('com.example.thing')).toBeUndefined()
    expect(pluginFor('app.bsky.feed.unknown')).toBeUndefined()
    // Only the NSIDs below site.standard: neither the bare prefix nor a lookalike.
    expect(pluginFor('site.standard')).toBeUndefined()
    expect(pluginFor('site.standardx.document')).toBeUndefined()
  })

  it('lists the collections as a stream filter takes them, site.standard as a prefix', () => {
    const listed = indexedCollections()
    expect(listed).toEqual([...plugins.map((p) => p.collection), 'site.standard.*'])
    expect(listed).toEqual(expect.arrayContaining([...STOCK, 'site.standard.*']))
    // Exact NSIDs and one prefix: a filter takes nothing else.
    expect(listed.filter((c) => c.endsWith('.*'))).toEqual(['site.standard.*'])
  })

  it('checks a stored record again by its collection, and refuses one it has no plugin for', () => {
    const like = {
      $type: 'app.bsky.feed.like',
      subject: {
        uri: 'at://did:plc:bobbobbobbobbobbobbobbobb/app.bsky.feed.post/3kpost000001',
        cid: 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm',
      },
      createdAt: '2026-03-01T11:00:00.000Z',
    }
    expect(parseRecord('app.bsky.feed.like', like)).toEqual(like)
    expect(() => parseRecord('app.bsky.feed.like', { $type: 'app.bsky.feed.like' })).toThrow()
    expect(() => parseRecord('com.example.thing', like)).toThrow()
  })
})

// The synchronous node reader against @atcute/mst's own: the same nodes from every block of a
// tree, and the same refusals of malformed ones.
import { encode, toBytes } from '@atcute/cbor'
import { MemoryBlockStore, MSTNode, NodeStore, NodeWrangler, getKeyHeight } from '@atcute/mst'
import { describe, expect, it } from 'vitest'
import { heightOf, nodeFromBlock } from './tree-nodes.ts'

const LEAF = { $link: 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm' }
const links = (cids: readonly ({ $link: string } | null)[]) => cids.map((c) => c?.$link ?? null)

async function tree(count: number) {
  const store = new MemoryBlockStore()
  const wrangler = new NodeWrangler(new NodeStore(store))
  let root: string | null = null
  for (let i = 0; i < count; i++) {
    root = await wrangler.putRecord(
      root,
      `app.bsky.feed.like/3k${String(i).padStart(8, '0')}`,
      LEAF,
    )
  }
  return store.blocks
}

/**
 * A leaf node's block holding these keys as given (nothing checked), each stored after the
 * prefix it shares with the one before, or after the prefix length `p` says.
 */
function block(entries: { key: string; p?: number }[]) {
  let prev = ''
  const e = entries.map(({ key, p }) => {
    let shared = 0
    while (shared < prev.length && prev[shared] === key[shared]) shared++
    const prefix = p ?? shared
    prev = key
    return { p: prefix, k: toBytes(new TextEncoder().encode(key.slice(prefix))), t: null, v: LEAF }
  })
  return encode({ l: null, e })
}

describe('tree nodes read from checked blocks', () => {
  it('reads every node of a tree as @atcute does, with its height', async () => {
    const blocks = await tree(600)
    expect(blocks.size).toBeGreaterThan(20)
    for (const bytes of blocks.values()) {
      const ours = nodeFromBlock(bytes)
      const theirs = await MSTNode.deserialize(bytes)
      expect(ours.keys).toEqual(theirs.keys)
      expect(links(ours.values)).toEqual(links(theirs.values))
      expect(links(ours.subtrees)).toEqual(links(theirs.subtrees))
      expect(await ours.height()).toBe(await theirs.height())
      // The block is kept: the node's CID is its block's.
      expect((await ours.cid()).$link).toBe((await theirs.cid()).$link)
    }
  })

  it('computes key heights as @atcute does', async () => {
    for (let i = 0; i < 2000; i++) {
      const key = `app.bsky.feed.post/3l${i.toString(36)}`
      expect(heightOf(key)).toBe(await getKeyHeight(key))
    }
  })

  it('reads a node it built itself, and refuses what @atcute refuses', async () => {
    const fine = block([{ key: 'app.bsky.feed.like/a' }])
    expect(nodeFromBlock(fine).keys).toEqual((await MSTNode.deserialize(fine)).keys)
    // Two keys of different heights (found by search), in order.
    const keys = Array.from({ length: 200 }, (_, i) => `app.bsky.feed.like/k${i}`).sort()
    const low = keys.find((k) => heightOf(k) === 0)!
    const high = keys.find((k) => heightOf(k) > 0 && k > low)!
    // Each with what our reader says: the check that refuses it, not an earlier one.
    const malformed: [string, Uint8Array, RegExp][] = [
      ['keys of two heights', block([{ key: low }, { key: high }]), /inconsistent key heights/],
      [
        'keys out of order',
        block([{ key: 'app.bsky.feed.like/b' }, { key: 'app.bsky.feed.like/a' }]),
        /sort order/,
      ],
      [
        'a prefix longer than the key before',
        block([{ key: 'app.bsky.feed.like/a', p: 3 }]),
        /unexpected key prefix length/,
      ],
      [
        'a prefix shorter than it could be',
        block([{ key: 'app.bsky.feed.like/a' }, { key: 'app.bsky.feed.like/b', p: 0 }]),
        /suboptimal key prefix length/,
      ],
      ['a key that is no record path', block([{ key: 'no-slash' }]), /no-slash/],
      ['not a node', encode({ l: null, e: 'nothing' }), /invalid structure/],
    ]
    for (const [what, bytes, reason] of malformed) {
      await expect(MSTNode.deserialize(bytes), what).rejects.toThrow()
      expect(() => nodeFromBlock(bytes), what).toThrow(reason)
    }
  })
})

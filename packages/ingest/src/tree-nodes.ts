// Tree nodes read from a commit's blocks for its proofs, with @atcute/mst's own checks but without
// its per-key `await`s. @atcute's node reader checks that every key of a node sits at the same
// height, hashing each key through an async SHA-256, a promise and a microtask apiece: about a
// fifteenth of a verifying decode thread (some forty keys a commit). Here the same checks run in
// one synchronous pass, and the node keeps the height found and its block, which the tree code
// would otherwise compute again. Blocks reach this store only after their hash was checked
// against their CID (commit-frame.ts).
import { hash } from 'node:crypto'
import { decode as decodeCbor, fromBytes } from '@atcute/cbor'
import {
  assertMstKey,
  isNodeData,
  MissingBlockError,
  MSTNode,
  NodeStore,
  type BlockStore,
} from '@atcute/mst'
import { decodeUtf8From } from '@atcute/uint8array'

/** What @atcute's node caches and does not declare: filled here as its own reader would. */
interface NodeCaches {
  _bytes: Uint8Array
  _height: number
}

/** An MSTNode made from checked parts (@atcute keeps its constructor to its own readers). */
class ReadNode extends MSTNode {
  constructor(keys: string[], values: MSTNode['values'], subtrees: MSTNode['subtrees']) {
    super(keys, values, subtrees)
  }
}

/** A NodeStore whose nodes are read by `nodeFromBlock`. */
export class CheckedNodeStore extends NodeStore {
  constructor(store: BlockStore) {
    super(store)
  }

  override async get(cid: string | null): Promise<MSTNode> {
    // The empty tree's node is made, not read.
    if (cid === null) return super.get(cid)
    let node = this.cache.get(cid)
    if (node === undefined) {
      const bytes = await this.store.get(cid)
      if (bytes === null) throw new MissingBlockError(cid, 'MST node')
      node = nodeFromBlock(bytes)
      this.cache.put(cid, node)
    }
    return node
  }
}

/**
 * The node a block holds, refused as @atcute's `MSTNode.deserialize` refuses it: not a node's
 * shape, a key prefix out of range or longer than it could be, keys out of order or malformed,
 * keys of different heights.
 */
export function nodeFromBlock(bytes: Uint8Array): MSTNode {
  const data = decodeCbor(bytes) as unknown
  if (!isNodeData(data)) throw new TypeError('malformed MST node; invalid structure')
  const keys: string[] = []
  const values: MSTNode['values'][number][] = []
  const subtrees: MSTNode['subtrees'][number][] = [data.l]
  let prevKey = ''
  let height: number | undefined
  for (const entry of data.e) {
    const prefixLen = entry.p
    if (!Number.isInteger(prefixLen) || prefixLen < 0 || prefixLen > prevKey.length) {
      throw new TypeError('malformed MST node; unexpected key prefix length')
    }
    const suffix = decodeUtf8From(fromBytes(entry.k))
    if (prevKey[prefixLen] === suffix[0]) {
      throw new TypeError('malformed MST node; suboptimal key prefix length')
    }
    const key = prevKey.slice(0, prefixLen) + suffix
    if (key <= prevKey) throw new TypeError('malformed MST node; invalid key sort order')
    assertMstKey(key)
    const keyHeight = heightOf(key)
    if (height !== undefined && keyHeight !== height) {
      throw new TypeError('malformed MST node; inconsistent key heights')
    }
    height = keyHeight
    keys.push(key)
    values.push(entry.v)
    subtrees.push(entry.t)
    prevKey = key
  }
  const node = new ReadNode(keys, values, subtrees)
  const caches = node as unknown as NodeCaches
  caches._bytes = bytes
  // A node without keys has no height of its own (0 when empty): left to @atcute to say.
  if (height !== undefined) caches._height = height
  return node
}

/** A key's height: leading zero bits of its SHA-256, in pairs (@atcute's getKeyHeight). */
export function heightOf(key: string): number {
  const digest = hash('sha256', key, 'buffer')
  let zeros = 0
  for (const byte of digest) {
    if (byte < 64) zeros++
    if (byte < 16) zeros++
    if (byte < 4) zeros++
    if (byte !== 0) break
    zeros++
  }
  return zeros
}

// The Merkle Search Tree of a user's records, as atproto repo v3 defines it, held in memory with
// each node's CID, so a record create, update or delete costs the nodes on its path: enough to
// sign real commits (repos.ts) and to prove each op (sync v1.1) without a blockstore.
import { createHash } from 'node:crypto'
import { type Block, CborWriter, type CidBin, cidOf } from './cbor.ts'

interface Entry {
  key: string
  value: CidBin
  /** The subtree of keys between this entry and the next. */
  right: MstNode | null
}

class MstNode {
  layer: number
  /** The subtree of keys before the first entry. */
  left: MstNode | null
  entries: Entry[]
  /** null while the node differs from its last serialized form. */
  cid: CidBin | null = null

  constructor(layer: number, left: MstNode | null, entries: Entry[]) {
    this.layer = layer
    this.left = left
    this.entries = entries
  }

  slot(i: number): MstNode | null {
    return i === 0 ? this.left : this.entries[i - 1]!.right
  }

  setSlot(i: number, child: MstNode | null): void {
    if (i === 0) this.left = child
    else this.entries[i - 1]!.right = child
  }

  isEmpty(): boolean {
    return this.entries.length === 0 && this.left === null
  }
}

/** Index of the first entry whose key is greater than `key` (keys are ASCII: JS order is bytewise). */
function upper(entries: Entry[], key: string): number {
  let lo = 0
  let hi = entries.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (entries[mid]!.key <= key) lo = mid + 1
    else hi = mid
  }
  return lo
}

/** The tree layer of a key: leading zero bits of its SHA-256, counted in pairs (fanout 4). */
export function keyLayer(key: string): number {
  const h = createHash('sha256').update(key, 'latin1').digest()
  let zeros = 0
  for (let i = 0; i < h.length; i++) {
    const b = h[i]!
    if (b === 0) {
      zeros += 8
      continue
    }
    zeros += Math.clz32(b) - 24
    break
  }
  return zeros >>> 1
}

/** A node at `layer` holding only the entry, under empty nodes up to `top`. */
function chain(top: number, key: string, layer: number, value: CidBin): MstNode {
  let node = new MstNode(layer, null, [{ key, value, right: null }])
  for (let l = layer + 1; l <= top; l++) node = new MstNode(l, node, [])
  return node
}

/**
 * Splits a subtree around `key` (not in it) into the part below and the part above, each at the
 * subtree's layer, null when empty. An untouched side is returned as is, keeping its CID.
 */
function split(node: MstNode, key: string): [MstNode | null, MstNode | null] {
  const i = upper(node.entries, key)
  const child = node.slot(i)
  let lo: MstNode | null = null
  let hi: MstNode | null = null
  if (child) [lo, hi] = split(child, key)
  if (i === node.entries.length && hi === null) return [node, null]
  if (i === 0 && lo === null) return [null, node]
  const upperPart = new MstNode(node.layer, hi, node.entries.slice(i))
  node.entries.length = i
  node.setSlot(i, lo)
  node.cid = null
  return [node.isEmpty() ? null : node, upperPart.isEmpty() ? null : upperPart]
}

function insertAt(node: MstNode, key: string, layer: number, value: CidBin): void {
  node.cid = null
  const i = upper(node.entries, key)
  if (i > 0 && node.entries[i - 1]!.key === key) throw new Error(`record exists: ${key}`)
  const child = node.slot(i)
  if (node.layer === layer) {
    let lo: MstNode | null = null
    let hi: MstNode | null = null
    if (child) [lo, hi] = split(child, key)
    node.setSlot(i, lo)
    node.entries.splice(i, 0, { key, value, right: hi })
  } else if (child) {
    insertAt(child, key, layer, value)
  } else {
    node.setSlot(i, chain(node.layer - 1, key, layer, value))
  }
}

/**
 * Joins two subtrees of one layer, every key of `a` below every key of `b`, into one: the
 * inverse of split. Only the nodes where they meet change: the right spine of `a` and the left
 * spine of `b`, merged pairwise down to where one side runs out, below which the other side's
 * subtree is kept as is (with its CID). `a` is reused as the joined node.
 */
function merge(a: MstNode | null, b: MstNode | null): MstNode | null {
  if (!a) return b
  if (!b) return a
  a.cid = null
  const n = a.entries.length
  a.setSlot(n, merge(a.slot(n), b.left))
  for (const e of b.entries) a.entries.push(e)
  return a
}

/**
 * Removes `key`, which the subtree holds, and returns the subtree, or null once it has nothing
 * left: an empty node is never written, its parent points to nothing instead (as the canonical
 * tree has it). Every node on the key's path changes.
 */
function removeAt(node: MstNode, key: string): MstNode | null {
  node.cid = null
  const i = upper(node.entries, key)
  if (i > 0 && node.entries[i - 1]!.key === key) {
    // The subtrees on either side of the entry become one, in the slot the entry leaves.
    const merged = merge(node.slot(i - 1), node.entries[i - 1]!.right)
    node.entries.splice(i - 1, 1)
    node.setSlot(i - 1, merged)
  } else {
    node.setSlot(i, removeAt(node.slot(i)!, key))
  }
  return node.isEmpty() ? null : node
}

function commonPrefix(a: string, b: string): number {
  const n = Math.min(a.length, b.length)
  let i = 0
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++
  return i
}

/** The node's DAG-CBOR bytes; its children must have their CIDs. */
function encodeNode(node: MstNode, w: CborWriter): Buffer {
  w.map(2).text('e').array(node.entries.length)
  let prev = ''
  for (const e of node.entries) {
    const p = commonPrefix(prev, e.key)
    w.map(4)
    w.text('k').latin1Bytes(p === 0 ? e.key : e.key.slice(p))
    w.text('p').uint(p)
    w.text('t').cidOrNull(e.right ? e.right.cid : null)
    w.text('v').cid(e.value)
    prev = e.key
  }
  w.text('l').cidOrNull(node.left ? node.left.cid : null)
  return w.finish()
}

/** Serializes every changed node (children first), appending the new blocks to `out`. */
function flush(node: MstNode, w: CborWriter, out: Block[]): CidBin {
  if (node.cid !== null) return node.cid
  if (node.left) flush(node.left, w, out)
  for (const e of node.entries) if (e.right) flush(e.right, w, out)
  const bytes = encodeNode(node, w)
  const cid = cidOf(bytes)
  node.cid = cid
  out.push({ cid, bytes })
  return cid
}

export type OpAction = 'create' | 'update' | 'delete'

/** The tree alone, for building and checking roots without commits. */
export class Mst {
  private root: MstNode | null = null
  size = 0
  /** Nodes on the path to the key last looked up by find(), root first (reused: no garbage). */
  private readonly path: MstNode[] = []

  /** The node holding `key` and the entry's index, with `path` set to the nodes down to it. */
  private find(key: string): { node: MstNode; index: number } | null {
    this.path.length = 0
    for (let node = this.root; node;) {
      this.path.push(node)
      const i = upper(node.entries, key)
      if (i > 0 && node.entries[i - 1]!.key === key) return { node, index: i - 1 }
      node = node.slot(i)
    }
    return null
  }

  /** The CID stored under `key`, null if absent. */
  get(key: string): CidBin | null {
    const found = this.find(key)
    return found ? found.node.entries[found.index]!.value : null
  }

  add(key: string, value: CidBin): void {
    const layer = keyLayer(key)
    if (!this.root) {
      this.root = chain(layer, key, layer, value)
    } else {
      while (this.root.layer < layer) this.root = new MstNode(this.root.layer + 1, this.root, [])
      insertAt(this.root, key, layer, value)
    }
    this.size++
  }

  /**
   * Points an existing `key` at `value` and returns the CID it had. The tree's shape does not
   * change (a key's place depends on the key alone): only the nodes on its path are new.
   */
  update(key: string, value: CidBin): CidBin {
    const found = this.find(key)
    if (!found) throw new Error(`record not found: ${key}`)
    const entry = found.node.entries[found.index]!
    const prev = entry.value
    entry.value = value
    for (const node of this.path) node.cid = null
    return prev
  }

  /**
   * Removes `key` and returns the CID it had. The subtrees on either side of its entry merge
   * (recursively, along the spines where they meet), a node left empty disappears, and a root
   * left with no entries gives way to its only child, down to the first node with entries: the
   * tree is then exactly the one built from the remaining keys alone. An empty tree stays valid
   * (its root is the empty node).
   */
  delete(key: string): CidBin {
    // Looked up first so that a missing key leaves every node (and its CID) as it was.
    const prev = this.get(key)
    if (prev === null) throw new Error(`record not found: ${key}`)
    let root = removeAt(this.root!, key)
    while (root && root.entries.length === 0) root = root.left
    this.root = root
    this.size--
    return prev
  }

  /** The root CID after serializing what changed; the new node blocks go to `out`. */
  commit(w: CborWriter, out: Block[]): CidBin {
    if (this.root) return flush(this.root, w, out)
    const bytes = w.map(2).text('e').array(0).text('l').null().finish()
    const cid = cidOf(bytes)
    out.push({ cid, bytes })
    return cid
  }

  /**
   * Adds to `out` (after commit()) the nodes a consumer needs to undo an op on `key` in the new
   * tree (sync v1.1 inversion), beyond the new nodes already there, which most of them are:
   * - create: proveNeighbours (undoing it deletes the key, merging its neighbours);
   * - update: the path to the key (undoing it puts back prev in place);
   * - delete: the search path of the key down to the bottom of the tree, which proves it absent
   *   and is what undoing it (inserting it back, splitting the subtree where it goes) reads.
   * An untouched node is re-encoded from its children's CIDs (its bytes are not kept).
   */
  proveOp(action: OpAction, key: string, w: CborWriter, out: Block[]): void {
    if (action === 'create') return this.proveNeighbours(key, w, out)
    const add = this.prover(w, out)
    let node = this.root
    while (node) {
      add(node)
      const i = upper(node.entries, key)
      if (i > 0 && node.entries[i - 1]!.key === key) {
        if (action === 'update') return
        throw new Error(`deleted key still in tree: ${key}`)
      }
      node = node.slot(i)
    }
    if (action === 'update') throw new Error(`key not in tree: ${key}`)
  }

  /**
   * Adds to `out` (after commit()) the nodes that prove `key` and its neighbours, which is what
   * undoing its create needs (sync v1.1): the path to the key, the right spine of the subtree
   * just before it and the left spine of the one just after. Most are new nodes already in
   * `out`; an untouched neighbour subtree is re-encoded from its children's CIDs.
   */
  proveNeighbours(key: string, w: CborWriter, out: Block[]): void {
    const add = this.prover(w, out)
    for (let node = this.root; node;) {
      add(node)
      const i = upper(node.entries, key)
      if (i > 0 && node.entries[i - 1]!.key === key) {
        for (let lo = node.slot(i - 1); lo;) {
          add(lo)
          lo = lo.entries.length ? lo.entries[lo.entries.length - 1]!.right : lo.left
        }
        for (let hi = node.entries[i - 1]!.right; hi; hi = hi.left) add(hi)
        return
      }
      node = node.slot(i)
    }
    throw new Error(`key not in tree: ${key}`)
  }

  /** Adds a serialized node's block to `out` unless a block with its CID is there already. */
  private prover(w: CborWriter, out: Block[]): (node: MstNode) => void {
    const have = new Set(out.map((b) => b.cid))
    return (node) => {
      if (have.has(node.cid!)) return
      have.add(node.cid!)
      out.push({ cid: node.cid!, bytes: encodeNode(node, w) })
    }
  }
}

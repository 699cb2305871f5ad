// Per-user repositories, kept just well enough to sign real commits: the Merkle Search Tree of the
// user's records (as atproto repo v3 defines it), held in memory with each node's CID, so a record
// create costs the nodes on its path. Record bodies are not kept (only their CIDs, in the tree):
// the tree and the commit chain (rev, since, prevData) are all a next commit needs.
import { createHash } from 'node:crypto'
import type { Secp256k1Keypair } from '@atproto/crypto'
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

/** The tree alone, for building and checking roots without commits. */
export class Mst {
  private root: MstNode | null = null
  size = 0

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

  /** The root CID after serializing what changed; the new node blocks go to `out`. */
  commit(w: CborWriter, out: Block[]): CidBin {
    if (this.root) return flush(this.root, w, out)
    const bytes = w.map(2).text('e').array(0).text('l').null().finish()
    const cid = cidOf(bytes)
    out.push({ cid, bytes })
    return cid
  }

  /**
   * Adds to `out` (after commit()) the nodes that prove `key` and its neighbours, which is what
   * undoing its create needs (sync v1.1): the path to the key, the right spine of the subtree
   * just before it and the left spine of the one just after. Most are new nodes already in
   * `out`; an untouched neighbour subtree is re-encoded from its children's CIDs.
   */
  proveNeighbours(key: string, w: CborWriter, out: Block[]): void {
    const have = new Set(out.map((b) => b.cid))
    const add = (node: MstNode) => {
      if (have.has(node.cid!)) return
      have.add(node.cid!)
      out.push({ cid: node.cid!, bytes: encodeNode(node, w) })
    }
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
}

const KEY_RE = /^[a-zA-Z0-9.-]{1,317}\/[a-zA-Z0-9._:~-]{1,512}$/

/** A commit ready to sign: the unsigned commit bytes plus everything its frame needs. */
export interface PreparedCommit {
  did: string
  rev: string
  /** rev of the repo's previous commit (null for the first one emitted). */
  since: string | null
  /** MST root of the previous commit (sync v1.1), null for the first. */
  prevData: CidBin | null
  data: CidBin
  path: string
  recordCid: CidBin
  unsigned: Buffer
  /** The record and the new MST nodes: with the commit, the CAR slice of the event. */
  blocks: Block[]
}

export interface SignedCommit extends PreparedCommit {
  commit: CidBin
  commitBytes: Buffer
}

export class SimRepo {
  readonly did: string
  /** The signing key, when commits are signed in this thread. */
  readonly keypair: Secp256k1Keypair | null
  private readonly mst = new Mst()
  private rev: string | null = null
  private data: CidBin | null = null

  constructor(did: string, keypair: Secp256k1Keypair | null) {
    this.did = did
    this.keypair = keypair
  }

  get records(): number {
    return this.mst.size
  }

  /**
   * Adds a record and prepares the commit that says so. `rev` must be a TID greater than every
   * earlier rev of this repo. Synchronous: the repo moves on at once, only signing is left.
   */
  create(w: CborWriter, collection: string, rkey: string, record: Block, rev: string) {
    const path = `${collection}/${rkey}`
    if (!KEY_RE.test(path)) throw new Error(`invalid record path: ${path}`)
    if (this.rev !== null && rev <= this.rev) {
      throw new Error(`rev ${rev} is not after ${this.rev} (${this.did})`)
    }
    this.mst.add(path, record.cid)
    const blocks: Block[] = [record]
    const data = this.mst.commit(w, blocks)
    this.mst.proveNeighbours(path, w, blocks)
    const unsigned = w
      .map(5)
      .text('did')
      .text(this.did)
      .text('rev')
      .text(rev)
      .text('data')
      .cid(data)
      .text('prev')
      .null()
      .text('version')
      .uint(3)
      .finish()
    const prepared: PreparedCommit = {
      did: this.did,
      rev,
      since: this.rev,
      prevData: this.data,
      data,
      path,
      recordCid: record.cid,
      unsigned,
      blocks,
    }
    this.rev = rev
    this.data = data
    return prepared
  }
}

/** Encodes the signed commit (the unsigned one plus `sig`) and its CID. */
export function signedCommit(w: CborWriter, c: PreparedCommit, sig: Uint8Array): SignedCommit {
  const commitBytes = w
    .map(6)
    .text('did')
    .text(c.did)
    .text('rev')
    .text(c.rev)
    .text('sig')
    .bytes(sig)
    .text('data')
    .cid(c.data)
    .text('prev')
    .null()
    .text('version')
    .uint(3)
    .finish()
  return { ...c, commit: cidOf(commitBytes), commitBytes }
}

/** Encodes an app.bsky.feed.post record (text, createdAt). */
export function postRecord(w: CborWriter, text: string, createdAt: string): Block {
  const bytes = w
    .map(3)
    .text('text')
    .text(text)
    .text('$type')
    .text('app.bsky.feed.post')
    .text('createdAt')
    .text(createdAt)
    .finish()
  return { cid: cidOf(bytes), bytes }
}

/** Encodes an app.bsky.graph.follow record (subject DID, createdAt). */
export function followRecord(w: CborWriter, subject: string, createdAt: string): Block {
  const bytes = w
    .map(3)
    .text('$type')
    .text('app.bsky.graph.follow')
    .text('subject')
    .text(subject)
    .text('createdAt')
    .text(createdAt)
    .finish()
  return { cid: cidOf(bytes), bytes }
}

/** The repos of the users that have emitted, made on first use. */
export class SimRepos {
  private readonly repos = new Map<number, SimRepo>()
  private readonly makeRepo: (id: number) => SimRepo

  constructor(makeRepo: (id: number) => SimRepo) {
    this.makeRepo = makeRepo
  }

  get size(): number {
    return this.repos.size
  }

  has(id: number): boolean {
    return this.repos.has(id)
  }

  get(id: number): SimRepo {
    let repo = this.repos.get(id)
    if (!repo) {
      repo = this.makeRepo(id)
      this.repos.set(id, repo)
    }
    return repo
  }
}

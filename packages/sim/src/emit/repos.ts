// Per-user repositories, kept just well enough to sign real commits: the user's records in a
// Merkle Search Tree (mst.ts). Record bodies are not kept (only their CIDs, in the tree): the tree
// and the commit chain (rev, since, prevData) are all a next commit needs, and the tree holds each
// record's current CID, which update and delete ops carry as prev.
import type { Secp256k1Keypair } from '@atproto/crypto'
import { type Block, CborWriter, type CidBin, cidOf } from './cbor.ts'
import { Mst, type OpAction } from './mst.ts'

export type { OpAction } from './mst.ts'

const KEY_RE = /^[a-zA-Z0-9.-]{1,317}\/[a-zA-Z0-9._:~-]{1,512}$/

/** Ops a #commit frame may carry (the subscribeRepos lexicon's maxLength). */
export const MAX_COMMIT_OPS = 200

/** One write a commit is asked to make. */
export interface RepoWrite {
  action: OpAction
  collection: string
  rkey: string
  /** The record a create or update stores; a delete has none. */
  record?: Block
}

/** One op of a commit, as its frame lists it. */
export interface CommitOp {
  action: OpAction
  path: string
  /** CID of the record written; null for a delete. */
  cid: CidBin | null
  /**
   * CID the path held before the commit, for update and delete (sync v1.1: consumers undo the op
   * with it to check prevData); null for a create.
   */
  prev: CidBin | null
}

/** A commit ready to sign: the unsigned commit bytes plus everything its frame needs. */
export interface PreparedCommit {
  did: string
  rev: string
  /** rev of the repo's previous commit (null for the first one emitted). */
  since: string | null
  /** MST root of the previous commit (sync v1.1), null for the first. */
  prevData: CidBin | null
  data: CidBin
  ops: CommitOp[]
  unsigned: Buffer
  /**
   * The records written, the new MST nodes and the untouched ones undoing the ops reads: with the
   * commit, the CAR slice of the event.
   */
  blocks: Block[]
}

/** A commit of one create, with its path and record CID at hand. */
export interface PreparedCreate extends PreparedCommit {
  path: string
  recordCid: CidBin
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

  /** The CID of the record at `collection/rkey`, null if there is none. */
  recordCid(collection: string, rkey: string): CidBin | null {
    return this.mst.get(`${collection}/${rkey}`)
  }

  /**
   * Applies the writes (each to a different path; usually one) and prepares the commit that says
   * so. `rev` must be a TID greater than every earlier rev of this repo. Synchronous: the repo
   * moves on at once, only signing is left. Every write is checked before any is applied (a
   * create's path must be free, an update's or delete's must hold a record), so a refused commit
   * leaves the repo as it was.
   */
  commit(w: CborWriter, writes: readonly RepoWrite[], rev: string): PreparedCommit {
    if (writes.length === 0 || writes.length > MAX_COMMIT_OPS) {
      throw new Error(`a commit has 1..${MAX_COMMIT_OPS} ops, got ${writes.length}`)
    }
    if (this.rev !== null && rev <= this.rev) {
      throw new Error(`rev ${rev} is not after ${this.rev} (${this.did})`)
    }
    const ops: CommitOp[] = []
    // Two ops on one path would make the ops' order matter to a consumer undoing them.
    const paths = writes.length > 1 ? new Set<string>() : null
    for (const { action, collection, rkey, record } of writes) {
      if (action !== 'create' && action !== 'update' && action !== 'delete') {
        throw new Error(`unknown action: ${String(action)}`)
      }
      const path = `${collection}/${rkey}`
      if (!KEY_RE.test(path)) throw new Error(`invalid record path: ${path}`)
      if (paths) {
        if (paths.has(path)) throw new Error(`two ops on ${path} in one commit`)
        paths.add(path)
      }
      const prev = this.mst.get(path)
      if (action === 'create' ? prev !== null : prev === null) {
        throw new Error(`cannot ${action} ${path} (${this.did}): ${prev ? 'exists' : 'not found'}`)
      }
      if ((action === 'delete') !== (record === undefined)) {
        throw new Error(`${action} of ${path}: ${record ? 'a delete has no' : 'needs a'} record`)
      }
      ops.push({ action, path, cid: record ? record.cid : null, prev })
    }
    const blocks: Block[] = []
    for (const [i, op] of ops.entries()) {
      if (op.action === 'delete') {
        this.mst.delete(op.path)
        continue
      }
      if (op.action === 'create') this.mst.add(op.path, op.cid!)
      else this.mst.update(op.path, op.cid!)
      // Two writes of identical records share one block.
      const record = writes[i]!.record!
      if (ops.length === 1 || !blocks.some((b) => b.cid === record.cid)) blocks.push(record)
    }
    const data = this.mst.commit(w, blocks)
    // Several ops: each op's proof in the final tree, together (as the reference PDS sends, one
    // covering proof per write); a consumer undoing them one by one finds what each needs.
    for (const op of ops) this.mst.proveOp(op.action, op.path, w, blocks)
    const unsigned = unsignedCommit(w, this.did, rev, data)
    const prepared: PreparedCommit = {
      did: this.did,
      rev,
      since: this.rev,
      prevData: this.data,
      data,
      ops,
      unsigned,
      blocks,
    }
    this.rev = rev
    this.data = data
    return prepared
  }

  /** Adds a record: commit() of one create. */
  create(
    w: CborWriter,
    collection: string,
    rkey: string,
    record: Block,
    rev: string,
  ): PreparedCreate {
    const c = this.commit(w, [{ action: 'create', collection, rkey, record }], rev)
    return Object.assign(c, { path: c.ops[0]!.path, recordCid: record.cid })
  }
}

/** The v3 commit's bytes as signed: every field but `sig`. */
export function unsignedCommit(w: CborWriter, did: string, rev: string, data: CidBin): Buffer {
  return w
    .map(5)
    .text('did')
    .text(did)
    .text('rev')
    .text(rev)
    .text('data')
    .cid(data)
    .text('prev')
    .null()
    .text('version')
    .uint(3)
    .finish()
}

/** The v3 commit's block: the unsigned fields plus `sig`. */
export function commitBlock(
  w: CborWriter,
  c: { did: string; rev: string; data: CidBin },
  sig: Uint8Array,
): { cid: CidBin; bytes: Buffer } {
  const bytes = w
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
  return { cid: cidOf(bytes), bytes }
}

/** Encodes the signed commit (the unsigned one plus `sig`) and its CID. */
export function signedCommit<C extends PreparedCommit>(
  w: CborWriter,
  c: C,
  sig: Uint8Array,
): C & SignedCommit {
  const { cid, bytes } = commitBlock(w, c, sig)
  return { ...c, commit: cid, commitBytes: bytes }
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

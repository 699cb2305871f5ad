// An independent check of emitted #commit frames with @atproto/repo, the reference repo code:
// the CAR's blocks match their CIDs, the commit is signed by the given key, the MST proves each
// op (a create's or update's record is in the tree, a delete's path is not), and undoing the ops
// on the new tree gives back prevData (sync v1.1 inversion), which only works if the CAR carries
// every node the undoing reads.
import { parseCidFromBytes } from '@atproto/common'
import {
  def,
  MemoryBlockstore,
  MST,
  readCarWithRoot,
  RepoVerificationError,
  verifyCommitSig,
} from '@atproto/repo'
import { Frame } from '@atproto/xrpc-server'
import type { CidBin } from './cbor.ts'

export interface CheckedCommit {
  seq: number
  repo: string
  rev: string
  since: string | null
  paths: string[]
  ops: { action: string; path: string }[]
  /** True when prevData was checked by inversion; false for a repo's first commit (none). */
  inverted: boolean
}

type CidLike = NonNullable<Awaited<ReturnType<MST['get']>>>

interface CommitBody {
  seq: number
  repo: string
  rev: string
  since: string | null
  commit: CidLike
  blocks: Uint8Array
  ops: { action: string; path: string; cid: CidLike | null; prev?: CidLike }[]
  prevData?: CidLike
}

/** Checks one #commit frame; throws a RepoVerificationError saying what is wrong. */
export async function checkCommitFrame(bytes: Uint8Array, didKey: string): Promise<CheckedCommit> {
  const frame = Frame.fromBytes(bytes)
  if (!frame.isMessage() || frame.type !== '#commit') {
    throw new RepoVerificationError(`not a #commit frame`)
  }
  const body = frame.body as unknown as CommitBody
  const fail = (msg: string) => new RepoVerificationError(`seq ${body.seq}: ${msg}`)
  // A node missing from the CAR surfaces as a block-store error: say which op needed it.
  const inTree = async <T>(what: string, read: () => Promise<T>): Promise<T> => {
    try {
      return await read()
    } catch (err) {
      if (err instanceof RepoVerificationError) throw err
      throw fail(`${what}: ${err instanceof Error ? err.message : String(err)}`)
    }
  }
  // Reading the CAR checks every block against its CID.
  const car = await readCarWithRoot(body.blocks)
  if (!car.root.equals(body.commit)) throw fail('CAR root is not the commit')
  const storage = new MemoryBlockstore(car.blocks)
  const commit = await storage.readObj(car.root, def.commit)
  if (commit.did !== body.repo) throw fail(`commit of ${commit.did}`)
  if (commit.rev !== body.rev) throw fail(`commit rev ${commit.rev}, frame rev ${body.rev}`)
  if (!(await verifyCommitSig(commit, didKey))) throw fail('bad signature')
  let mst = MST.load(storage, commit.data)
  const paths = new Set<string>()
  for (const op of body.ops) {
    if (paths.has(op.path)) throw fail(`two ops on ${op.path}`)
    paths.add(op.path)
    const found = await inTree(`${op.action} ${op.path}`, () => mst.get(op.path))
    if (op.action === 'create' || op.action === 'update') {
      if (!op.cid) throw fail(`${op.action} of ${op.path} without a cid`)
      if (!found?.equals(op.cid)) throw fail(`${op.path} is not in the tree`)
      if (!car.blocks.has(found)) throw fail(`record block of ${op.path} missing`)
    } else if (op.action === 'delete') {
      if (op.cid !== null) throw fail(`delete of ${op.path} with a cid`)
      if (found) throw fail(`deleted ${op.path} is still in the tree`)
    } else {
      throw fail(`unknown op ${op.action}`)
    }
    // Sync v1.1: an update or delete says what it replaced, or it cannot be undone.
    if (op.action === 'create' ? op.prev !== undefined : !op.prev) {
      throw fail(`${op.action} of ${op.path} ${op.prev ? 'with' : 'without'} prev`)
    }
  }
  let inverted = false
  if (body.prevData) {
    // Undone last op first, each on the tree the later ones left.
    for (const op of [...body.ops].reverse()) {
      mst = await inTree(`undoing ${op.action} ${op.path}`, () =>
        op.action === 'create'
          ? mst.delete(op.path)
          : op.action === 'update'
            ? mst.update(op.path, op.prev!)
            : mst.add(op.path, op.prev!),
      )
    }
    const prev = await inTree('inverted root', () => mst.getPointer())
    if (!prev.equals(body.prevData)) {
      throw fail(`inverted tree ${prev.toString()} is not prevData ${body.prevData.toString()}`)
    }
    inverted = true
  } else if (body.since !== null) {
    throw fail('since without prevData')
  }
  return {
    seq: body.seq,
    repo: body.repo,
    rev: body.rev,
    since: body.since,
    paths: body.ops.map((op) => op.path),
    ops: body.ops.map((op) => ({ action: op.action, path: op.path })),
    inverted,
  }
}

/**
 * The root CID @atproto/repo's MST has for a key → CID set, built from scratch by adding every
 * key to an empty tree: the canonical tree, which one kept up by creates, updates and deletes
 * must equal.
 */
export async function referenceMstRoot(entries: Iterable<[string, CidBin]>): Promise<CidBin> {
  const mst = await ReferenceMst.create()
  for (const [key, cid] of entries) await mst.add(key, cid)
  return mst.root()
}

/**
 * @atproto/repo's MST kept up op by op, over keys and CIDs as emission holds them: the reference
 * a tree kept up elsewhere is compared with (cheaper than rebuilding it for every commit).
 */
export class ReferenceMst {
  private mst: MST

  private constructor(mst: MST) {
    this.mst = mst
  }

  static async create(): Promise<ReferenceMst> {
    return new ReferenceMst(await MST.create(new MemoryBlockstore()))
  }

  async add(key: string, cid: CidBin): Promise<void> {
    this.mst = await this.mst.add(key, toCid(cid))
  }

  async update(key: string, cid: CidBin): Promise<void> {
    this.mst = await this.mst.update(key, toCid(cid))
  }

  async delete(key: string): Promise<void> {
    this.mst = await this.mst.delete(key)
    // Emptied, @atproto/repo's tree still remembers the layer its root had, and the next key
    // added below that layer would hang under a chain of empty nodes: not the canonical tree,
    // nor what a tree read back from its (empty) root block does. Start over from a fresh one.
    if ((await this.mst.getEntries()).length === 0) {
      this.mst = await MST.create(new MemoryBlockstore())
    }
  }

  async root(): Promise<CidBin> {
    return Buffer.from((await this.mst.getPointer()).bytes).toString('latin1')
  }
}

function toCid(cid: CidBin) {
  return parseCidFromBytes(Buffer.from(cid, 'latin1'))
}

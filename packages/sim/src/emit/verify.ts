// An independent check of emitted #commit frames with @atproto/repo, the reference repo code:
// the CAR's blocks match their CIDs, the commit is signed by the given key, the MST proves each
// op's record, and undoing the ops on the new tree gives back prevData (sync v1.1 inversion).
import {
  def,
  MemoryBlockstore,
  MST,
  readCarWithRoot,
  RepoVerificationError,
  verifyCommitSig,
} from '@atproto/repo'
import { Frame } from '@atproto/xrpc-server'

export interface CheckedCommit {
  seq: number
  repo: string
  rev: string
  since: string | null
  paths: string[]
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
  ops: { action: string; path: string; cid: CidLike | null }[]
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
  // Reading the CAR checks every block against its CID.
  const car = await readCarWithRoot(body.blocks)
  if (!car.root.equals(body.commit)) throw fail('CAR root is not the commit')
  const storage = new MemoryBlockstore(car.blocks)
  const commit = await storage.readObj(car.root, def.commit)
  if (commit.did !== body.repo) throw fail(`commit of ${commit.did}`)
  if (commit.rev !== body.rev) throw fail(`commit rev ${commit.rev}, frame rev ${body.rev}`)
  if (!(await verifyCommitSig(commit, didKey))) throw fail('bad signature')
  let mst = MST.load(storage, commit.data)
  for (const op of body.ops) {
    if (op.action !== 'create' || !op.cid) throw fail(`unexpected op ${op.action}`)
    const found = await mst.get(op.path)
    if (!found?.equals(op.cid)) throw fail(`${op.path} is not in the tree`)
    if (!car.blocks.has(found)) throw fail(`record block of ${op.path} missing`)
  }
  let inverted = false
  if (body.prevData) {
    for (const op of body.ops) mst = await mst.delete(op.path)
    const prev = await mst.getPointer()
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
    inverted,
  }
}

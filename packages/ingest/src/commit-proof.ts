// Sync 1.1's commit proof: a commit frame carries, besides the records, the tree nodes its ops
// touched and the root the tree had before (`prevData`). Undoing the ops on the new tree (a
// create deleted, an update or delete put back to the op's `prev`) must give exactly that root:
// then the commit changed the repo by these ops and nothing else, and a consumer can trust the
// chain without the whole repo. @atcute/mst does the tree work over the frame's blocks; a node
// the proof lacks is a proof that does not hold.
import type { CidLink } from '@atcute/cid'
import {
  MemoryBlockStore,
  NodeWrangler,
  OverlayBlockStore,
  ReadonlyMemoryBlockStore,
  type BlockMap,
  type NodeStore,
} from '@atcute/mst'
import { CheckedNodeStore } from './tree-nodes.ts'

export interface ProofOp {
  action: 'create' | 'update' | 'delete'
  /** collection/rkey */
  path: string
  /** The record's CID before the op (update, delete). */
  prev?: CidLink
}

/**
 * A commit's tree nodes over its frame's blocks (each checked against its CID), nodes made while
 * undoing its ops kept apart. One per commit, shared by the op proofs and the commit proof: each
 * node is decoded, and its keys' heights hashed, once (tree-nodes.ts).
 */
export function proofNodes(blocks: BlockMap): NodeStore {
  return new CheckedNodeStore(
    new OverlayBlockStore(new MemoryBlockStore(), new ReadonlyMemoryBlockStore(blocks)),
  )
}

/**
 * Whether undoing `ops` on the tree at `root` (over `nodes`, from proofNodes) gives `prevData`
 * (null: the repo was empty). False when a node it needs is missing, or an op has no prev where
 * it needs one.
 */
export async function invertsTo(
  nodes: NodeStore,
  root: string,
  ops: ProofOp[],
  prevData: string | null,
): Promise<boolean> {
  const wrangler = new NodeWrangler(nodes)
  let at: string | null = root
  try {
    for (const op of ops) {
      if (op.action === 'create') at = await wrangler.deleteRecord(at, op.path)
      else if (op.prev) at = await wrangler.putRecord(at, op.path, op.prev)
      else return false
    }
  } catch {
    return false
  }
  return at === prevData || (prevData === null && at === (await emptyRoot()))
}

let empty: Promise<string> | undefined
/** The CID of an empty tree's root node. */
function emptyRoot(): Promise<string> {
  empty ??= import('@atcute/mst').then(async ({ MSTNode }) => (await MSTNode.empty().cid()).$link)
  return empty
}

// A #commit frame decoded with @atcute's DAG-CBOR and CAR readers, which return plain values and
// byte views of the frame instead of @atproto's object model: the header and body are read once,
// the CAR's blocks are walked as views, every block is hashed against its CID (as @atproto/repo's
// readCar does, so a corrupt block still fails the commit), and only the blocks the ops name are
// decoded, with @atproto/repo's own record decoder so records keep the data model the plugins
// and the stock's checks see. In verifying mode the commit's signature is checked natively
// (@openplane/signatures) and each op against the commit's tree (@atcute/mst), as the reference
// does, and a sync 1.1 commit proof is undone to its prevData (commit-proof.ts).
//
// This is the common case only. A frame it does not recognise as an ordinary, well-formed commit
// (another message type, an odd op path, a CID it cannot read, a signature or op that does not
// verify, anything that throws) answers `undefined`, and frames.ts decodes it the reference way:
// what is accepted, dropped or refused never depends on which path read the frame
// (tests/indexer/commit-frame.test.ts holds the two paths to the same results). The one thing the
// reference does not check, a commit proof that does not undo, is refused here.
import { BytesWrapper, decodeFirst, encode as encodeCbor } from '@atcute/cbor'
import { CidLinkWrapper, toString as cidString } from '@atcute/cid'
import { NodeWalker, type BlockMap, type NodeStore } from '@atcute/mst'
import { cborToLexRecord } from '@atproto/repo'
import { verifySignature } from '@openplane/signatures'
import { counter } from '@openplane/telemetry'
import { hashMatches, openCar, sameBytes, signedCommit, type SignedCommit } from './commit-block.ts'
import { invertsTo, proofNodes } from './commit-proof.ts'
import type { CommitOp, IngestEvent } from './events.ts'
import { isDid, isObj, isSeq, isTime } from './frame-values.ts'

const proofs = counter(
  'openplane_commit_proofs_total',
  'Verifying mode: sync 1.1 commit proofs of commits whose signature and ops verified, by ' +
    'whether undoing the ops gave the prevData root (held, refused) or the frame had none (absent)',
  ['outcome'],
)

type Commit = Extract<IngestEvent, { type: 'commit' }>

/** What a well-formed commit frame gives: its event, and ops whose record was not in the CAR. */
export interface DecodedCommit {
  event: Commit
  dropped: number
}

/**
 * An op path whose collection and rkey are the text either side of its one slash. Others (no
 * slash, several, characters an AT-URI parser treats specially) go the reference way.
 */
const SIMPLE_PATH = /^[a-zA-Z0-9.-]+\/[a-zA-Z0-9._:~-]+$/

interface WantedOp {
  action: 'create' | 'update' | 'delete'
  path: string
  collection: string
  rkey: string
  cid?: CidLinkWrapper
  /** The record's CID before the op (sync 1.1; update and delete). */
  prev?: CidLinkWrapper
}

/** The frame's event if it is an ordinary commit this path reads exactly; else undefined. */
export function decodeCommitFrame(bytes: Uint8Array): DecodedCommit | undefined {
  try {
    const frame = readFrame(bytes)
    if (!frame) return undefined
    const records = recordBlocks(frame.blocks, frame.ops)
    return records && commitOf(frame, records)
  } catch {
    return undefined
  }
}

/** A commit refused in verifying mode for what the reference path does not check. */
export interface RefusedCommit {
  refused: string
  seq: number
}

/** The signing key of a DID as a did:key (`refresh`: not from a cache); rejects if none. */
export type KeyOf = (did: string, refresh: boolean) => Promise<string>

/**
 * Verifying mode: the frame's event when its commit is signed by the repo's key, every op is
 * proven by the commit's tree (created and updated records there with their CIDs, deleted ones
 * absent), and, where the frame carries `prevData`, undoing its ops on the tree gives that root
 * (sync 1.1). A commit whose proof does not undo to its `prevData` is refused; anything else this
 * path does not read exactly (a bad signature, an unproven op, an odd commit) is undefined and
 * goes the reference way, which decides as the stock does.
 */
export async function verifyCommitFrame(
  bytes: Uint8Array,
  keyOf: KeyOf,
): Promise<DecodedCommit | RefusedCommit | undefined> {
  let frame: Frame | undefined
  let car: { blocks: BlockMap; root: Uint8Array } | undefined
  let commit: SignedCommit | undefined
  try {
    frame = readFrame(bytes)
    car = frame && allBlocks(frame.blocks)
    commit = car && signedCommit(car.root, frame!.repo)
  } catch {
    return undefined
  }
  if (!frame || !car || !commit) return undefined
  const { blocks } = car
  if (!(await signedBy(commit, frame.repo, keyOf))) return undefined
  try {
    const nodes = proofNodes(blocks)
    if (!(await proven(nodes, commit.data.$link, frame.ops))) return undefined
    const records = frame.ops.map((op) => (op.cid ? blocks.get(op.cid.$link) : undefined))
    // The reference reads every proven record and refuses the commit when one is missing.
    if (frame.ops.some((op, i) => op.action !== 'delete' && !records[i])) return undefined
    const decoded = commitOf(frame, records)
    if (frame.prevData) {
      const holds = await invertsTo(
        nodes,
        commit.data.$link,
        frame.ops.map((op) => ({ action: op.action, path: op.path, prev: op.prev })),
        frame.prevData.$link,
      )
      proofs.inc({ outcome: holds ? 'held' : 'refused' })
      if (!holds) return { refused: 'commit proof does not undo to its prevData', seq: frame.seq }
    } else proofs.inc({ outcome: 'absent' })
    return decoded
  } catch {
    return undefined
  }
}

interface Frame {
  seq: number
  repo: string
  time: string
  rev: string
  since: unknown
  commit: CidLinkWrapper
  blocks: Uint8Array
  ops: WantedOp[]
  /** All ops the frame listed. */
  listed: number
  prevData: CidLinkWrapper | undefined
}

/** The header and body of an ordinary commit frame, or undefined. */
function readFrame(bytes: Uint8Array): Frame | undefined {
  const [header, rest] = decodeFirst(bytes) as [unknown, Uint8Array]
  if (!isObj(header) || header.op !== 1 || header.t !== '#commit') return undefined
  const [body, end] = decodeFirst(rest) as [unknown, Uint8Array]
  if (end.length || !isObj(body)) return undefined
  const { seq, repo, time, rev, since, commit, blocks, ops, prevData } = body
  if (!isSeq(seq) || !isDid(repo) || !isTime(time) || typeof rev !== 'string') return undefined
  if (!(commit instanceof CidLinkWrapper) || !(blocks instanceof BytesWrapper)) return undefined
  if (!Array.isArray(ops)) return undefined
  if (prevData !== undefined && prevData !== null && !(prevData instanceof CidLinkWrapper))
    return undefined
  const wanted: WantedOp[] = []
  for (const op of ops as unknown[]) {
    if (!isObj(op) || typeof op.path !== 'string' || !SIMPLE_PATH.test(op.path)) return undefined
    const { action, cid, prev } = op
    if (action !== 'create' && action !== 'update' && action !== 'delete') return undefined
    const slash = op.path.indexOf('/')
    const w: WantedOp = {
      action,
      path: op.path,
      collection: op.path.slice(0, slash),
      rkey: op.path.slice(slash + 1),
    }
    if (action !== 'delete') {
      if (!(cid instanceof CidLinkWrapper)) return undefined
      w.cid = cid
    }
    if (prev instanceof CidLinkWrapper) w.prev = prev
    wanted.push(w)
  }
  return {
    seq,
    repo,
    time,
    rev,
    since,
    commit,
    blocks: blocks.buf,
    ops: wanted,
    listed: ops.length,
    prevData: prevData ?? undefined,
  }
}

/** The event, given the block of each created or updated op (absent: left out, counted). */
function commitOf(frame: Frame, records: (Uint8Array | undefined)[]): DecodedCommit {
  const out: CommitOp[] = []
  for (const [i, w] of frame.ops.entries()) {
    if (w.action === 'delete') {
      out.push({ action: 'delete', collection: w.collection, rkey: w.rkey })
      continue
    }
    const block = records[i]
    if (!block) continue
    out.push({
      action: w.action,
      collection: w.collection,
      rkey: w.rkey,
      cid: w.cid!.$link,
      record: cborToLexRecord(block),
    })
  }
  return {
    event: {
      type: 'commit',
      seq: frame.seq,
      time: frame.time,
      did: frame.repo,
      commit: frame.commit.$link,
      rev: frame.rev,
      since: typeof frame.since === 'string' ? frame.since : null,
      ops: out,
    },
    dropped: frame.listed - out.length,
  }
}

/**
 * The block of each created or updated op, by op index (absent: not in the CAR), after checking
 * the CAR's header and every block's hash; undefined when the CAR is not one this path reads.
 */
function recordBlocks(car: Uint8Array, ops: WantedOp[]): (Uint8Array | undefined)[] | undefined {
  const reader = openCar(car)
  if (!reader) return undefined
  const found: (Uint8Array | undefined)[] = new Array(ops.length)
  for (const entry of reader) {
    const { cid } = entry
    if (!hashMatches(cid, entry.bytes)) return undefined
    for (const [i, op] of ops.entries()) {
      if (op.cid && sameBytes(op.cid.bytes, cid.bytes)) found[i] = entry.bytes
    }
  }
  return found
}

/** Every block of a CAR with exactly one root, by CID, hashes checked, and the root's block. */
function allBlocks(car: Uint8Array): { blocks: BlockMap; root: Uint8Array } | undefined {
  const reader = openCar(car)
  if (!reader || reader.roots.length !== 1) return undefined
  const blocks: BlockMap = new Map()
  for (const entry of reader) {
    if (!hashMatches(entry.cid, entry.bytes)) return undefined
    blocks.set(cidString(entry.cid), entry.bytes as Uint8Array<ArrayBuffer>)
  }
  const root = blocks.get(reader.roots[0]!.$link)
  return root && { blocks, root }
}

/** Whether the commit is signed by the DID's key (asked again, uncached, once if not). */
async function signedBy(commit: SignedCommit, did: string, keyOf: KeyOf): Promise<boolean> {
  const { sig, ...unsigned } = commit
  const payload = encodeCbor(unsigned)
  for (const refresh of [false, true]) {
    const key = await keyOf(did, refresh).catch(() => null)
    if (key && verifySignature(key, payload, sig.buf)) return true
  }
  return false
}

/**
 * Whether the tree at `root` holds each created or updated record at its path with its CID and
 * no record at a deleted path (what the reference's inclusion and exclusion checks decide).
 */
async function proven(nodes: NodeStore, root: string, ops: WantedOp[]): Promise<boolean> {
  for (const op of ops) {
    const walker = await NodeWalker.create(nodes, root)
    const found = await walker.findRpath(op.path)
    if (op.action === 'delete' ? found !== null : found?.$link !== op.cid!.$link) return false
  }
  return true
}

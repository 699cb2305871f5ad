// A #commit frame decoded with @atcute's DAG-CBOR and CAR readers, which return plain values and
// byte views of the frame instead of @atproto's object model: the header and body are read once,
// the CAR's blocks are walked as views, every block is hashed against its CID (as @atproto/repo's
// readCar does, so a corrupt block still fails the commit), and only the blocks the ops name are
// decoded, with @atproto/repo's own record decoder so records keep the data model the plugins
// and the stock's checks see.
//
// This is the common case only. A frame it does not recognise as an ordinary, well-formed commit
// (another message type, an odd op path, a CID it cannot read, anything that throws) answers
// `undefined`, and frames.ts decodes it the reference way: what is accepted, dropped or refused
// never depends on which path read the frame (tests/indexer/commit-frame.test.ts holds the two
// paths to the same results).
import { hash } from 'node:crypto'
import { fromUint8Array as readCar } from '@atcute/car'
import { BytesWrapper, decodeFirst } from '@atcute/cbor'
import { CidLinkWrapper, HASH_SHA256 } from '@atcute/cid'
import { cborToLexRecord } from '@atproto/repo'
import type { CommitOp, IngestEvent } from './events.ts'

type Obj = Record<string, unknown>
type Commit = Extract<IngestEvent, { type: 'commit' }>

/** What a well-formed commit frame gives: its event, and ops whose record was not in the CAR. */
export interface DecodedCommit {
  event: Commit
  dropped: number
}

const isObj = (v: unknown): v is Obj => !!v && typeof v === 'object' && !Array.isArray(v)
const isDid = (v: unknown): v is string =>
  typeof v === 'string' && /^did:[a-z]+:[a-zA-Z0-9._:%-]{1,2048}$/.test(v)
const isSeq = (v: unknown): v is number =>
  typeof v === 'number' && Number.isSafeInteger(v) && v >= 0
const isTime = (v: unknown): v is string => typeof v === 'string' && !Number.isNaN(Date.parse(v))
/**
 * An op path whose collection and rkey are the text either side of its one slash. Others (no
 * slash, several, characters an AT-URI parser treats specially) go the reference way.
 */
const SIMPLE_PATH = /^[a-zA-Z0-9.-]+\/[a-zA-Z0-9._:~-]+$/

const sameBytes = (a: Uint8Array, b: Uint8Array) => {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

interface WantedOp {
  action: 'create' | 'update' | 'delete'
  collection: string
  rkey: string
  cid?: CidLinkWrapper
}

/** The frame's event if it is an ordinary commit this path reads exactly; else undefined. */
export function decodeCommitFrame(bytes: Uint8Array): DecodedCommit | undefined {
  try {
    return decode(bytes)
  } catch {
    return undefined
  }
}

function decode(bytes: Uint8Array): DecodedCommit | undefined {
  const [header, rest] = decodeFirst(bytes) as [unknown, Uint8Array]
  if (!isObj(header) || header.op !== 1 || header.t !== '#commit') return undefined
  const [body, end] = decodeFirst(rest) as [unknown, Uint8Array]
  if (end.length || !isObj(body)) return undefined
  const { seq, repo, time, rev, since, commit, blocks, ops } = body
  if (!isSeq(seq) || !isDid(repo) || !isTime(time) || typeof rev !== 'string') return undefined
  if (!(commit instanceof CidLinkWrapper) || !(blocks instanceof BytesWrapper)) return undefined
  if (!Array.isArray(ops)) return undefined
  const wanted: WantedOp[] = []
  for (const op of ops as unknown[]) {
    if (!isObj(op) || typeof op.path !== 'string' || !SIMPLE_PATH.test(op.path)) return undefined
    const { action, cid } = op
    if (action !== 'create' && action !== 'update' && action !== 'delete') return undefined
    const slash = op.path.indexOf('/')
    const w: WantedOp = {
      action,
      collection: op.path.slice(0, slash),
      rkey: op.path.slice(slash + 1),
    }
    if (action !== 'delete') {
      if (!(cid instanceof CidLinkWrapper)) return undefined
      w.cid = cid
    }
    wanted.push(w)
  }
  const records = recordBlocks(blocks.buf, wanted)
  if (!records) return undefined
  const out: CommitOp[] = []
  for (const [i, w] of wanted.entries()) {
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
      seq,
      time,
      did: repo,
      commit: commit.$link,
      rev,
      since: typeof since === 'string' ? since : null,
      ops: out,
    },
    dropped: ops.length - out.length,
  }
}

/**
 * The block of each created or updated op, by op index (absent: not in the CAR), after checking
 * the CAR's header and every block's hash; undefined when the CAR is not one this path reads.
 */
function recordBlocks(car: Uint8Array, ops: WantedOp[]): (Uint8Array | undefined)[] | undefined {
  const reader = readCar(car)
  const head = reader.header.data as unknown
  if (!isObj(head) || head.version !== 1 || !Array.isArray(head.roots)) return undefined
  const found: (Uint8Array | undefined)[] = new Array(ops.length)
  for (const entry of reader) {
    const { cid } = entry
    if (cid.version !== 1 || cid.digest.codec !== HASH_SHA256) return undefined
    const digest = hash('sha256', entry.bytes, 'buffer')
    if (!sameBytes(digest, cid.digest.contents)) return undefined
    for (const [i, op] of ops.entries()) {
      if (op.cid && sameBytes(op.cid.bytes, cid.bytes)) found[i] = entry.bytes
    }
  }
  return found
}

// A repo CAR held in memory, read the common way fast: @atcute/car walks its blocks as views of
// the bytes, @atcute/repo walks the tree's leaves (strictly: key order, prefix compaction, depth
// and fan-out bounds), each record is decoded with @atproto/repo's record decoder so plugins see
// the one data model. In verifying mode every block is hashed against its CID and the commit's
// signature is checked natively (@openplane/signatures), as the reference reader (car.ts) does.
//
// The common case only: anything this path does not read exactly (a root that is not one v3
// commit of the repo, a key or node the walker refuses, a record block missing or not a record, a
// block or signature that does not verify) answers undefined, and the caller reads the CAR the
// reference way, which decides and reports as before. What is accepted never depends on the path.
import { hash } from 'node:crypto'
import { fromUint8Array as readCar } from '@atcute/car'
import { BytesWrapper, decode as decodeCbor, encode as encodeCbor } from '@atcute/cbor'
import { CidLinkWrapper, fromString as parseCid, HASH_SHA256, type Cid } from '@atcute/cid'
import { fromUint8Array as repoEntries } from '@atcute/repo'
import { cborToLexRecord } from '@atproto/repo'
import { verifySignature } from '@openplane/signatures'

/** One record of the repo, in key order. */
export interface ReadRecord {
  collection: string
  rkey: string
  cid: string
  record: unknown
}

/** A repo CAR read whole: its commit and every record its tree reaches, in key order. */
export interface ReadRepo {
  did: string
  rev: string
  /** The commit's CID. */
  commit: string
  bytes: number
  records: ReadRecord[]
  /** Leaves left out (a malformed key, a record that does not decode), with why. */
  bad: { key: string; reason: string }[]
}

/** The repo, if it is an ordinary one this path reads exactly; else undefined. */
export function readRepoFast(
  bytes: Uint8Array,
  opts: { did: string; signingKey: string | undefined },
): ReadRepo | undefined {
  try {
    const car = readCar(bytes)
    const head = car.header.data as unknown
    if (!isObj(head) || head.version !== 1 || car.roots.length !== 1) return undefined
    const rootCid = parseCid(car.roots[0]!.$link).bytes
    let root: Uint8Array | undefined
    const verify = opts.signingKey !== undefined
    for (const entry of car) {
      if (verify && !hashMatches(entry.cid, entry.bytes)) return undefined
      if (!root && sameBytes(entry.cid.bytes, rootCid)) root = entry.bytes
    }
    if (!root) return undefined
    const commit = signedCommit(root, opts.did)
    if (!commit) return undefined
    if (verify) {
      const { sig, ...unsigned } = commit
      if (!verifySignature(opts.signingKey!, encodeCbor(unsigned), sig.buf)) return undefined
    }
    const records: ReadRecord[] = []
    for (const entry of repoEntries(bytes)) {
      records.push({
        collection: entry.collection,
        rkey: entry.rkey,
        cid: entry.cid.$link,
        record: cborToLexRecord(entry.bytes),
      })
    }
    return {
      did: commit.did,
      rev: commit.rev,
      commit: car.roots[0]!.$link,
      bytes: bytes.length,
      records,
      bad: [],
    }
  } catch {
    return undefined
  }
}

interface SignedCommit {
  did: string
  version: 3
  data: CidLinkWrapper
  rev: string
  prev: CidLinkWrapper | null
  sig: BytesWrapper
}

/** The root block as a v3 commit of the repo with exactly the fields the reference reads. */
function signedCommit(root: Uint8Array, did: string): SignedCommit | undefined {
  const value = decodeCbor(root) as unknown
  if (!isObj(value) || Object.keys(value).length !== 6) return undefined
  const { version, data, rev, prev, sig } = value
  if (value.did !== did || version !== 3 || typeof rev !== 'string') return undefined
  if (!(data instanceof CidLinkWrapper) || !(sig instanceof BytesWrapper)) return undefined
  if (prev !== null && !(prev instanceof CidLinkWrapper)) return undefined
  return { did, version, data, rev, prev, sig }
}

const isObj = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v)

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

function hashMatches(cid: Cid, bytes: Uint8Array): boolean {
  if (cid.version !== 1 || cid.digest.codec !== HASH_SHA256) return false
  return sameBytes(hash('sha256', bytes, 'buffer'), cid.digest.contents)
}

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
import { encode as encodeCbor } from '@atcute/cbor'
import { fromString as parseCid } from '@atcute/cid'
import { fromUint8Array as repoEntries } from '@atcute/repo'
import { cborToLexRecord } from '@atproto/repo'
import { hashMatches, openCar, sameBytes, signedCommit } from '@openplane/ingest'
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
    const car = openCar(bytes)
    if (!car || car.roots.length !== 1) return undefined
    const rootCid = parseCid(car.roots[0]!.$link).bytes
    let root: Uint8Array | undefined
    const verify = opts.signingKey !== undefined
    // Verifying, every block is hashed; trusted, the walk stops at the commit (@atcute/repo reads
    // the blocks again for the tree).
    for (const entry of car) {
      if (verify && !hashMatches(entry.cid, entry.bytes)) return undefined
      if (!root && sameBytes(entry.cid.bytes, rootCid)) root = entry.bytes
      if (root && !verify) break
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

// A repo commit's block and the CAR checks around it, read with @atcute's plain values: shared by
// the firehose's fast frame reader (commit-frame.ts) and the backfill's fast CAR reader.
import { hash } from 'node:crypto'
import { fromUint8Array as readCar } from '@atcute/car'
import { BytesWrapper, decode as decodeCbor } from '@atcute/cbor'
import { CidLinkWrapper, HASH_SHA256, type Cid } from '@atcute/cid'
import { isObj } from './frame-values.ts'

export interface SignedCommit {
  did: string
  version: 3
  data: CidLinkWrapper
  rev: string
  prev: CidLinkWrapper | null
  sig: BytesWrapper
}

/** The block as a v3 commit of `repo` with exactly the fields the reference reads and signs. */
export function signedCommit(root: Uint8Array, repo: string): SignedCommit | undefined {
  const value = decodeCbor(root) as unknown
  if (!isObj(value) || Object.keys(value).length !== 6) return undefined
  const { did, version, data, rev, prev, sig } = value
  if (did !== repo || version !== 3 || typeof rev !== 'string') return undefined
  if (!(data instanceof CidLinkWrapper) || !(sig instanceof BytesWrapper)) return undefined
  if (prev !== null && !(prev instanceof CidLinkWrapper)) return undefined
  return { did, version, data, rev, prev, sig }
}

export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

/** Whether the block hashes to its CID (a v1 SHA-256 CID; any other is not read here). */
export function hashMatches(cid: Cid, bytes: Uint8Array): boolean {
  if (cid.version !== 1 || cid.digest.codec !== HASH_SHA256) return false
  return sameBytes(hash('sha256', bytes, 'buffer'), cid.digest.contents)
}

/** A CARv1 reader over the bytes, if its header is the one the reference reads. */
export function openCar(car: Uint8Array): ReturnType<typeof readCar> | undefined {
  const reader = readCar(car)
  const head = reader.header.data as unknown
  if (!isObj(head) || head.version !== 1 || !Array.isArray(head.roots)) return undefined
  return reader
}

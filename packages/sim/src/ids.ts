// Real-looking atproto identifiers, derived from user ids without any table: did:plc DIDs,
// handles, TID record keys and CIDs. All are pure functions, so every process (loader, emitter,
// identity stub) agrees on them.
import { hash32, mix32 } from './rng.ts'

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567'
const BASE32_SORT = '234567abcdefghijklmnopqrstuvwxyz'

/** Base32 (RFC 4648, lower case, unpadded) of the bits of `words`, most significant first. */
function base32Words(words: ArrayLike<number>, chars: number): string {
  let out = ''
  for (let i = 0; i < chars; i++) {
    const bit = i * 5
    const w = bit >>> 5
    const off = bit & 31
    const cur = w < words.length ? words[w]! : 0
    // Past the last word reads as zero bits, which pads the final character.
    const v =
      off <= 27
        ? cur >>> (27 - off)
        : (cur << (off - 27)) | ((w + 1 < words.length ? words[w + 1]! : 0) >>> (59 - off))
    out += BASE32[v & 31]
  }
  return out
}

const didWords = new Uint32Array(4)

/** `did:plc:` + 24 base32 chars. The first 32 bits are a bijection of the id: no two collide. */
export function didFor(id: number): string {
  const h0 = mix32((id ^ 0x5bd1e995) >>> 0)
  didWords[0] = h0
  didWords[1] = mix32((h0 + 0x68e31da4) >>> 0)
  didWords[2] = mix32((didWords[1] + 0xb5297a4d) >>> 0)
  didWords[3] = mix32((didWords[2] + 0x1b56c4e9) >>> 0)
  return `did:plc:${base32Words(didWords, 24)}`
}

export function handleFor(id: number, domain: string): string {
  return `user${id}.${domain}`
}

/** The user id of a handle made by handleFor (`user<id>.<domain>`), if it is one of 1..maxId. */
export function idForHandle(handle: string, domain: string, maxId: number): number | undefined {
  const suffix = `.${domain}`
  if (!handle.startsWith('user') || !handle.endsWith(suffix)) return undefined
  const digits = handle.slice(4, -suffix.length)
  if (!/^[1-9][0-9]*$/.test(digits)) return undefined
  const id = Number(digits)
  return id <= maxId ? id : undefined
}

/** The user id of a DID made by didFor, or undefined; the identity stub needs the inverse. */
export function idForDid(did: string, maxId: number): number | undefined {
  const m = /^did:plc:([a-z2-7]{24})$/.exec(did)
  if (!m) return undefined
  let h0 = 0
  for (let i = 0; i < 6; i++) h0 = h0 * 32 + BASE32.indexOf(m[1]![i]!)
  // 6 chars = 30 bits; the next char holds the last 2 bits of h0.
  h0 = (h0 * 4 + (BASE32.indexOf(m[1]![6]!) >>> 3)) >>> 0
  const id = (unmix32(h0) ^ 0x5bd1e995) >>> 0
  return id >= 1 && id <= maxId && didFor(id) === did ? id : undefined
}

/** Inverse of mix32. */
function unmix32(x: number): number {
  x = (x ^ (x >>> 15) ^ (x >>> 30)) >>> 0
  x = Math.imul(x, 0x97132227) >>> 0
  x = (x ^ (x >>> 15) ^ (x >>> 30)) >>> 0
  x = Math.imul(x, 0x333c4925) >>> 0
  return (x ^ (x >>> 16)) >>> 0
}

/**
 * A TID record key: 53 bits of microseconds since 1970, 10 bits of clock id, in base32-sortable,
 * 13 characters, exactly as atproto's TID.
 */
export function tid(timestampUs: number, clockId: number): string {
  let hi = Math.floor(timestampUs / 4194304) >>> 0
  let lo = (((timestampUs % 4194304) * 1024 + (clockId & 1023)) >>> 0) >>> 0
  const chars = new Array<string>(13)
  for (let i = 12; i >= 0; i--) {
    chars[i] = BASE32_SORT[lo & 31]!
    lo = ((lo >>> 5) | ((hi & 31) << 27)) >>> 0
    hi >>>= 5
  }
  return chars.join('')
}

const cidWords = new Uint32Array(9)
cidWords[0] = 0x01711220 // CIDv1, dag-cbor, sha2-256, 32 bytes

/**
 * A CIDv1 (dag-cbor, sha2-256) string whose "digest" is a hash of `parts`: well-formed and
 * deterministic, not the hash of real bytes (the base data has no blocks to verify against).
 */
export function cidFor(...parts: number[]): string {
  let h = hash32(...parts)
  for (let i = 1; i < 9; i++) {
    h = mix32((h + 0x9e3779b9 * i) >>> 0)
    cidWords[i] = h
  }
  return `b${base32Words(cidWords, 58)}`
}

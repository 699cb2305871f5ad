// Signature checks as atproto defines them (ECDSA over SHA-256, 64-byte compact r‖s, low-S only;
// secp256k1 "ES256K" and P-256 "ES256" keys as did:key), at native speed: a commit's or label's
// check is on the hot path of verifying ingest and backfill. Each did:key is parsed once, its
// point left compressed, and the prepared key kept. secp256k1 runs on libsecp256k1 (the
// `secp256k1` package's prebuilt N-API binding), which refuses high-S signatures itself; P-256
// runs on OpenSSL (node:crypto), with the low-S rule checked here. @atproto/crypto parses only
// the did:keys whose point is not compressed.
import { createPublicKey, hash, verify, type KeyObject } from 'node:crypto'
import { createRequire } from 'node:module'
import { fromBase58Btc } from '@atcute/multibase'
import { parseDidKey } from '@atproto/crypto'

interface Secp256k1 {
  ecdsaVerify(sig: Uint8Array, msg32: Uint8Array, publicKey: Uint8Array): boolean
}

const require = createRequire(import.meta.url)

interface Backend {
  secp: Secp256k1
  name: 'libsecp256k1' | 'elliptic'
}
/**
 * The native binding, or the package's pure-JS fallback (elliptic) where it cannot load; which
 * one runs is reported by signatureBackend(). Loaded at the first secp256k1 check, not on import:
 * every process and thread that parses frames imports this module, most never verify, and a
 * native addon loaded there is one more thing torn down at each thread's and the process's end.
 */
let loaded: Backend | undefined
function secp256k1(): Backend {
  if (loaded) return loaded
  try {
    loaded = { secp: require('secp256k1/bindings') as Secp256k1, name: 'libsecp256k1' }
  } catch {
    loaded = { secp: require('secp256k1/elliptic') as Secp256k1, name: 'elliptic' }
  }
  return loaded
}

/** Which secp256k1 implementation checks signatures in this process. */
export function signatureBackend(): 'libsecp256k1' | 'elliptic' {
  return secp256k1().name
}

/** P-256's group order halved: a signature's s above it is the high-S twin, refused. */
const P256_HALF_N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n >> 1n

type Prepared =
  { alg: 'ES256K'; key: Uint8Array } | { alg: 'ES256'; key: KeyObject } | { alg: 'unsupported' }

/** Parsed keys by did:key; a deployment sees a bounded set of signing keys, but bound it anyway. */
const keys = new Map<string, Prepared>()
const MAX_KEYS = 200_000

/** Multicodec prefixes of the two key types in a did:key (varint-encoded). */
const SECP256K1_PUB = [0xe7, 0x01]
const P256_PUB = [0x80, 0x24]
/** A P-256 SubjectPublicKeyInfo in DER, up to the compressed point that follows it. */
const P256_SPKI = Buffer.from('3039301306072a8648ce3d020106082a8648ce3d030107032200', 'hex')

function prepare(didKey: string): Prepared {
  let prepared = keys.get(didKey)
  if (prepared) return prepared
  try {
    prepared = prepareCompressed(didKey) ?? prepareParsed(didKey)
  } catch {
    prepared = { alg: 'unsupported' }
  }
  if (keys.size >= MAX_KEYS) keys.delete(keys.keys().next().value!)
  keys.set(didKey, prepared)
  return prepared
}

/**
 * A did:key holding a compressed point, used as it is: libsecp256k1 and OpenSSL take compressed
 * points, so no square root is taken in JavaScript (@atproto/crypto decompresses every key it
 * parses, which costs more than the check itself). Undefined for any other form.
 */
function prepareCompressed(didKey: string): Prepared | undefined {
  if (!didKey.startsWith('did:key:z')) return undefined
  const bytes = fromBase58Btc(didKey.slice('did:key:z'.length))
  if (bytes.length !== 35 || (bytes[2] !== 0x02 && bytes[2] !== 0x03)) return undefined
  const point = bytes.subarray(2)
  if (bytes[0] === SECP256K1_PUB[0] && bytes[1] === SECP256K1_PUB[1]) {
    return { alg: 'ES256K', key: point }
  }
  if (bytes[0] === P256_PUB[0] && bytes[1] === P256_PUB[1]) {
    const der = Buffer.concat([P256_SPKI, point])
    return { alg: 'ES256', key: createPublicKey({ key: der, format: 'der', type: 'spki' }) }
  }
  return undefined
}

/** Any other did:key @atproto/crypto reads. */
function prepareParsed(didKey: string): Prepared {
  const { jwtAlg, keyBytes } = parseDidKey(didKey)
  if (jwtAlg === 'ES256K') return { alg: 'ES256K', key: keyBytes }
  if (jwtAlg !== 'ES256') return { alg: 'unsupported' }
  // keyBytes: the uncompressed point 04‖x‖y.
  const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64url')
  const jwk = {
    kty: 'EC',
    crv: 'P-256',
    x: b64(keyBytes.subarray(1, 33)),
    y: b64(keyBytes.subarray(33, 65)),
  }
  return { alg: 'ES256', key: createPublicKey({ key: jwk, format: 'jwk' }) }
}

/**
 * Whether `sig` is a valid atproto signature of `data` by the did:key. An unparseable or
 * unsupported key, a DER or otherwise mis-sized signature, and a high-S signature are all false.
 */
export function verifySignature(didKey: string, data: Uint8Array, sig: Uint8Array): boolean {
  if (sig.length !== 64) return false
  const key = prepare(didKey)
  if (key.alg === 'ES256K') {
    try {
      return secp256k1().secp.ecdsaVerify(sig, hash('sha256', data, 'buffer'), key.key)
    } catch {
      return false
    }
  }
  if (key.alg === 'ES256') {
    let s = 0n
    for (let i = 32; i < 64; i++) s = (s << 8n) | BigInt(sig[i]!)
    if (s > P256_HALF_N) return false
    return verify('sha256', data, { key: key.key, dsaEncoding: 'ieee-p1363' }, sig)
  }
  return false
}

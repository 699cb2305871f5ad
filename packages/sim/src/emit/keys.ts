// Per-user signing keys: secp256k1, derived from (seed, user id) so every process of a simulation
// (emitter, identity stub, a restarted run) agrees on them without storing any. Made on demand
// and kept in a bounded cache: a userbase may have millions of users, few of whom ever sign.
import { createHash } from 'node:crypto'
import { Secp256k1Keypair } from '@atproto/crypto'

/** Order of the secp256k1 group: a private key is an integer in [1, N - 1]. */
const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n

/** The 32 private key bytes of a user: SHA-256 of (seed, id, attempt), retried if out of range. */
export function privateKeyFor(seed: number, id: number): Uint8Array {
  for (let attempt = 0; ; attempt++) {
    const d = createHash('sha256')
      .update(`openplane-sim/secp256k1/${seed}/${id}/${attempt}`)
      .digest()
    const n = BigInt(`0x${d.toString('hex')}`)
    if (n > 0n && n < N) return new Uint8Array(d)
  }
}

export interface SimKeysOptions {
  seed: number
  /** Keypairs kept at most (least recently used go first); each costs a public key derivation. */
  cacheSize?: number
}

export class SimKeys {
  readonly seed: number
  private readonly cacheSize: number
  private readonly cache = new Map<number, Secp256k1Keypair>()

  constructor(opts: SimKeysOptions) {
    this.seed = opts.seed
    this.cacheSize = Math.max(1, opts.cacheSize ?? 100_000)
  }

  keypair(id: number): Secp256k1Keypair {
    const hit = this.cache.get(id)
    if (hit) {
      this.cache.delete(id)
      this.cache.set(id, hit)
      return hit
    }
    // The constructor derives the public key synchronously; import() only wraps it in a promise.
    const kp = new Secp256k1Keypair(privateKeyFor(this.seed, id), false)
    if (this.cache.size >= this.cacheSize) {
      this.cache.delete(this.cache.keys().next().value!)
    }
    this.cache.set(id, kp)
    return kp
  }

  /** `did:key:z…` of the user's public key. */
  didKey(id: number): string {
    return this.keypair(id).did()
  }

  /** The Multikey `publicKeyMultibase` of a DID document: the did:key without its prefix. */
  publicKeyMultibase(id: number): string {
    return this.didKey(id).slice('did:key:'.length)
  }
}

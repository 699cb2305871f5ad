// Deterministic randomness. Everything generated is a pure function of (parameters, seed), so a
// run can be replayed byte for byte; 32-bit integer math only, because BigInt is far too slow for
// billions of draws.

const TWO_POW_32 = 4294967296
const TWO_POW_53 = 9007199254740992

/** A bijection on 32-bit integers (lowbias32): distinct inputs give distinct outputs. */
export function mix32(x: number): number {
  x = (x ^ (x >>> 16)) >>> 0
  x = Math.imul(x, 0x21f0aaad)
  x = (x ^ (x >>> 15)) >>> 0
  x = Math.imul(x, 0x735a2d97)
  return (x ^ (x >>> 15)) >>> 0
}

/** Combines values into one 32-bit hash; order matters. */
export function hash32(...parts: number[]): number {
  let h = 0x9e3779b9
  for (const p of parts) h = mix32((h ^ mix32(p >>> 0)) + 0x6a09e667)
  return h
}

/** xoshiro128**: small state, fast, good enough statistics for simulation; seeded via splitmix32. */
export class Rng {
  private a: number
  private b: number
  private c: number
  private d: number

  constructor(...seed: number[]) {
    let s = hash32(...seed)
    const next = (): number => {
      // splitmix32: spreads one seed over the four state words, never all zero.
      s = (s + 0x9e3779b9) >>> 0
      return mix32(s) || 1
    }
    this.a = next()
    this.b = next()
    this.c = next()
    this.d = next()
  }

  /** Uniform 32-bit unsigned integer. */
  u32(): number {
    const result = Math.imul(rotl(Math.imul(this.b, 5), 7), 9) >>> 0
    const t = this.b << 9
    this.c ^= this.a
    this.d ^= this.b
    this.b ^= this.c
    this.a ^= this.d
    this.c ^= t
    this.d = rotl(this.d, 11)
    return result
  }

  /** Uniform in [0, 1) with 53 bits of precision. */
  float(): number {
    const hi = this.u32() >>> 5
    const lo = this.u32() >>> 6
    return (hi * 67108864 + lo) / TWO_POW_53
  }

  /** Uniform integer in [0, n), n ≤ 2^32; rejection keeps it unbiased. */
  int(n: number): number {
    if (n <= 1) return 0
    const limit = TWO_POW_32 - (TWO_POW_32 % n)
    for (;;) {
      const x = this.u32()
      if (x < limit) return x % n
    }
  }

  /** Poisson-distributed count with mean `mean`. */
  poisson(mean: number): number {
    if (mean <= 0) return 0
    if (mean < 30) {
      // Knuth: multiply uniforms until below e^-mean.
      const limit = Math.exp(-mean)
      let k = 0
      let p = this.float()
      while (p > limit) {
        k++
        p *= this.float()
      }
      return k
    }
    // Normal approximation: exact enough at this size, and constant time.
    return Math.max(0, Math.round(mean + Math.sqrt(mean) * this.normal()))
  }

  /** Standard normal (Box–Muller). */
  normal(): number {
    const u = 1 - this.float()
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * this.float())
  }

  /** floor(x) plus one with probability frac(x): the integer count whose mean is x. */
  roundStochastic(x: number): number {
    const whole = Math.floor(x)
    return whole + (this.float() < x - whole ? 1 : 0)
  }
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0
}

// Lossy timelines, Bluesky's rule: a reader following more than a reasonable number of accounts
// gets each fan-out write with probability limit / follows (loss_factor = min(limit / follows, 1);
// a write is dropped when a uniform draw in [0, 1) is not below it). Every reader then costs at
// most "limit follows' worth" of writes. Bluesky draws once per fan-out page and compares it with
// each reader's factor; pass a constant `rand` to do the same.

/** Keep this write for a reader following `followCount` accounts? `limit` = Infinity turns it off. */
export function lossyKeep(followCount: number, limit: number, rand: () => number): boolean {
  if (!(followCount > limit)) return true
  return rand() < limit / followCount
}

/** A small seeded PRNG (mulberry32) for reproducible lossy decisions in tests and benches. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

// The follower law every generator shares: the follower count of a user follows from its id alone,
// so a scenario can pick "a user with ~1000 followers" without reading the userbase.

/** Followers of user `rank` (1-based) in a base of `n` users: ⌊n·density/rank⌋, capped at n−1. */
export function followersOf(rank: number, n: number, density: number): number {
  return Math.min(n - 1, Math.floor((n * density) / rank))
}

/** Sum of followersOf over all users: the number of follows in the base. */
export function totalFollows(n: number, density: number): number {
  let total = 0
  for (let r = 1; r <= n; r++) total += followersOf(r, n, density)
  return total
}

/**
 * The tier of a user with `followers` followers: the first whose max_followers is at least that;
 * users above every tier belong to the last one (the most-followed post the most, not never).
 */
export function tierIndex(tiers: readonly { max_followers: number }[], followers: number): number {
  for (let i = 0; i < tiers.length; i++) if (followers <= tiers[i]!.max_followers) return i
  return tiers.length - 1
}

// Follower knowledge for firehose-lag probes, from the userbase model alone: the followers of a
// user are recomputed from the parameters (userbase.ts), so no follow table is needed.
import type { UserbaseParams } from '../params.ts'
import { buildFollowerModel, sampleFollowers } from '../userbase.ts'

/**
 * `followerOf` for LagOptions: a follower of `userId` in the generated userbase, preferring one in
 * `active` (in a session now), else the first one; undefined for users without followers.
 * Memory: the model (~13 bytes per user) and one buffer of num_users ints.
 */
export function userbaseFollowerOf(
  params: UserbaseParams,
): (userId: number, active?: ReadonlySet<number>) => number | undefined {
  const model = buildFollowerModel(params)
  const out = new Int32Array(params.num_users)
  const taken = new Uint8Array((params.num_users >>> 3) + 1)
  return (userId, active) => {
    if (!Number.isInteger(userId) || userId < 1 || userId > params.num_users) return undefined
    const k = sampleFollowers(model, params, userId, out, taken)
    if (k === 0) return undefined
    if (active && active.size > 0) {
      for (let i = 0; i < k; i++) if (active.has(out[i]!)) return out[i]!
    }
    return out[0]!
  }
}

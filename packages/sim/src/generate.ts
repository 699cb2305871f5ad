// Scenario generators, as in the seed toolkit: users 1..max_active_user_id act; each one's rate
// comes from the tier of its follower count (the law of powerlaw.ts); times are uniform over the
// scenario's `time_units` days. Each user draws from its own random stream, so changing one
// tier or the active range leaves the other users' events as they were.
import type { ScenarioParams } from './params.ts'
import { followersOf, tierIndex } from './powerlaw.ts'
import { Rng } from './rng.ts'
import {
  byOffset,
  mergeScenarios,
  type FollowEvent,
  type PostEvent,
  type Scenario,
  type SessionEvent,
} from './scenario.ts'

export const DAY_MS = 86_400_000

const SALT = { posts: 0x706f7374, sessions: 0x73657373, follows: 0x666f6c6c } as const

/** Follow attempts per event before giving up on finding a new subject for the user. */
const SUBJECT_TRIES = 32

export function generateScenario(params: ScenarioParams): Scenario {
  const { n, max_active_user_id: active, seed, time_units: days, follower_density } = params
  const span = days * DAY_MS
  const tierOf = (user: number): number =>
    tierIndex(params.tiers, followersOf(user, n, follower_density))
  const at = (rng: Rng): number => Math.floor(rng.float() * span)

  if (params.kind === 'posts') {
    const posts: PostEvent[] = []
    for (let user = 1; user <= active; user++) {
      const rng = new Rng(seed, SALT.posts, user)
      const count = rng.poisson(params.tiers[tierOf(user)]!.posts_per_day * days)
      for (let i = 0; i < count; i++) posts.push({ user_id: user, offset_ms: at(rng) })
    }
    return { posts: posts.sort(byOffset) }
  }

  if (params.kind === 'sessions') {
    const sessions: SessionEvent[] = []
    for (let user = 1; user <= active; user++) {
      const rng = new Rng(seed, SALT.sessions, user)
      const tier = params.tiers[tierOf(user)]!
      // Stochastic rounding rather than Poisson: at one session a day, every user has exactly one.
      const count = rng.roundStochastic(tier.sessions_per_day * days)
      const duration = Math.round(tier.session_minutes * 60_000)
      for (let i = 0; i < count; i++) {
        sessions.push({ user_id: user, duration_ms: duration, offset_ms: at(rng) })
      }
    }
    return { sessions: sessions.sort(byOffset) }
  }

  const follows: FollowEvent[] = []
  const logN = Math.log(n + 1)
  for (let user = 1; user <= active; user++) {
    const rng = new Rng(seed, SALT.follows, user)
    const count = rng.poisson(params.tiers[tierOf(user)]!.follows_per_day * days)
    const chosen = new Set<number>()
    for (let i = 0; i < count; i++) {
      for (let t = 0; t < SUBJECT_TRIES; t++) {
        // P(subject = r) ∝ log(1 + 1/r) ≈ 1/r: the popular get followed, as in the base.
        const subject = Math.min(n, Math.floor(Math.exp(rng.float() * logN)))
        if (subject === user || chosen.has(subject)) continue
        chosen.add(subject)
        follows.push({ user_id: user, subject_id: subject, offset_ms: at(rng) })
        break
      }
    }
  }
  return { follows: follows.sort((a, b) => byOffset(a, b) || a.subject_id - b.subject_id) }
}

/** Several parameter files into one scenario (e.g. a posts and a sessions generator). */
export function generateScenarios(params: ScenarioParams[]): Scenario {
  return mergeScenarios(params.map(generateScenario))
}

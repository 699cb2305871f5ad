// The follow graph of a userbase, streamed subject by subject in bounded memory.
//
// In-degree is fixed by the law (powerlaw.ts): subject r gets exactly followersOf(r) followers.
// Who those followers are is skewed: each user has an activity weight (heavy-tailed Pareto, boosted
// for active users), and a user is a follower of r with probability min(1, c_r·weight), c_r chosen
// so the expected count is exactly followersOf(r). Out-degree is therefore about proportional to
// weight (heavy-tailed) until it saturates at "follows everyone". Weights are quantized into
// half-octave levels, which makes solving c_r, and sampling without replacement, O(levels + k).
//
// Memory: ~13 bytes per user (level, members, follower buffer) plus 4 for the out-degree counts;
// nothing grows with the number of follows. 40M users ≈ 700 MB.
import type { UserbaseParams } from './params.ts'
import { followersOf } from './powerlaw.ts'
import { hash32, Rng } from './rng.ts'

/** Pareto tail index of activity: smaller is heavier. */
const ALPHA = 1.2
/** Cap of the Pareto factor, so the heaviest users follow "thousands", not literally everyone. */
const MAX_PARETO = 2048
/** Active users (id ≤ max_active_user_id) follow this many times more. */
const ACTIVE_BOOST = 4
/** Two levels per octave of weight. */
const LEVELS_PER_OCTAVE = 2
const LEVELS = Math.ceil(Math.log2(MAX_PARETO * ACTIVE_BOOST) * LEVELS_PER_OCTAVE) + 1

// Salts keep the independent random streams of one seed apart.
const SALT_WEIGHT = 0x77656967
const SALT_SUBJECT = 0x7375626a

const scratchTakes = new Int32Array(LEVELS)
const scratchExpected = new Float64Array(LEVELS)

export interface FollowerModel {
  n: number
  /** Weight of each level: 2^(level / LEVELS_PER_OCTAVE). */
  weight: Float64Array
  /** Users of level l are members[start[l] .. start[l + 1]), by ascending id. */
  start: Int32Array
  members: Int32Array
  /** Level of each user id (index 0 unused). */
  levelOf: Uint8Array
  /** count[l] · weight[l] summed over levels ≤ l. */
  weightPrefix: Float64Array
}

/** Activity level of user `id`, from its own hash: no state, the same in every process. */
export function activityLevel(params: UserbaseParams, id: number): number {
  const u = (hash32(params.seed, SALT_WEIGHT, id) + 0.5) / 4294967296
  const pareto = Math.min(MAX_PARETO, Math.pow(u, -1 / ALPHA))
  const w = id <= params.max_active_user_id ? pareto * ACTIVE_BOOST : pareto
  return Math.min(LEVELS - 1, Math.floor(Math.log2(w) * LEVELS_PER_OCTAVE))
}

export function buildFollowerModel(params: UserbaseParams): FollowerModel {
  const n = params.num_users
  const levelOf = new Uint8Array(n + 1)
  const count = new Int32Array(LEVELS)
  for (let id = 1; id <= n; id++) {
    const l = activityLevel(params, id)
    levelOf[id] = l
    count[l]!++
  }
  const start = new Int32Array(LEVELS + 1)
  for (let l = 0; l < LEVELS; l++) start[l + 1] = start[l]! + count[l]!
  const members = new Int32Array(n)
  const fill = start.slice(0, LEVELS)
  for (let id = 1; id <= n; id++) members[fill[levelOf[id]!]!++] = id
  const weight = new Float64Array(LEVELS)
  const weightPrefix = new Float64Array(LEVELS)
  let acc = 0
  for (let l = 0; l < LEVELS; l++) {
    weight[l] = Math.pow(2, l / LEVELS_PER_OCTAVE)
    acc += count[l]! * weight[l]!
    weightPrefix[l] = acc
  }
  return { n, weight, start, members, levelOf, weightPrefix }
}

/**
 * Fills `out` with the followers of `subject` (user ids, each once, never the subject itself) and
 * returns how many: exactly followersOf(subject). `taken` is scratch space of n bits, all clear
 * on entry and on return.
 */
export function sampleFollowers(
  model: FollowerModel,
  params: UserbaseParams,
  subject: number,
  out: Int32Array,
  taken: Uint8Array,
): number {
  const { n, weight, start, members, levelOf, weightPrefix } = model
  const k = followersOf(subject, n, params.follower_density)
  const rng = new Rng(params.seed, SALT_SUBJECT, subject)
  const own = levelOf[subject]!
  const size = (l: number): number => start[l + 1]! - start[l]! - (l === own ? 1 : 0)

  // Solve for the highest unsaturated level `top` and the scale c: levels above top are taken
  // whole (p = 1), levels at or below it with p = c·weight.
  let saturated = 0
  let top = LEVELS - 1
  let c = 0
  for (; top >= 0; top--) {
    const unsat = weightPrefix[top]! - (own <= top ? weight[own]! : 0)
    c = unsat > 0 ? (k - saturated) / unsat : Infinity
    if (c * weight[top]! <= 1) break
    saturated += size(top)
  }

  // Systematic rounding of the expected per-level counts (one shared uniform offset): each level
  // gets ⌊e⌋ or ⌈e⌉, and the total is k up to float error, which the fix-up below absorbs.
  const takes = scratchTakes
  const expectations = scratchExpected
  const offset = rng.float()
  let cumulative = 0
  let total = 0
  for (let l = LEVELS - 1; l >= 0; l--) {
    const avail = Math.max(0, size(l))
    const e = l > top ? avail : Math.min(avail, avail * c * weight[l]!)
    const take = Math.floor(cumulative + e + offset) - Math.floor(cumulative + offset)
    cumulative += e
    expectations[l] = e
    takes[l] = Math.max(0, Math.min(avail, take))
    total += takes[l]!
  }
  while (total !== k) {
    // Off by one at most: move the level whose rounding was furthest from its expectation.
    const dir = total < k ? 1 : -1
    let best = -1
    for (let l = 0; l < LEVELS; l++) {
      const room = dir > 0 ? takes[l]! < size(l) : takes[l]! > 0
      const gap = (expectations[l]! - takes[l]!) * dir
      if (room && (best < 0 || gap > (expectations[best]! - takes[best]!) * dir)) best = l
    }
    takes[best]! += dir
    total += dir
  }

  let count = 0
  for (let l = LEVELS - 1; l >= 0; l--) {
    if (takes[l]! === 0) continue
    const skip = l === own ? subject : 0
    count = pickUniform(rng, members, start[l]!, size(l), skip, takes[l]!, out, count, taken)
  }
  return count
}

/**
 * Appends `take` distinct members of one level (uniformly, skipping `skip`) to `out` at `count`;
 * returns the new count.
 */
function pickUniform(
  rng: Rng,
  members: Int32Array,
  from: number,
  avail: number,
  skip: number,
  take: number,
  out: Int32Array,
  count: number,
  taken: Uint8Array,
): number {
  // Position of the skipped member within the level (members are sorted by id).
  let skipAt = avail + 1
  if (skip) {
    let lo = from
    let hi = from + avail
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (members[mid]! < skip) lo = mid + 1
      else hi = mid
    }
    skipAt = lo - from
  }
  const at = (i: number): number => members[from + (i >= skipAt ? i + 1 : i)]!
  if (take * 2 > avail) {
    // Selection sampling: one pass, each candidate kept with probability needed / remaining.
    let needed = take
    for (let i = 0; i < avail && needed > 0; i++) {
      if (rng.int(avail - i) < needed) {
        out[count++] = at(i)
        needed--
      }
    }
    return count
  }
  const first = count
  while (count - first < take) {
    const i = rng.int(avail)
    if (taken[i >>> 3]! & (1 << (i & 7))) continue
    taken[i >>> 3]! |= 1 << (i & 7)
    out[count++] = i
  }
  for (let j = first; j < count; j++) {
    const i = out[j]!
    taken[i >>> 3]! &= ~(1 << (i & 7))
    out[j] = at(i)
  }
  return count
}

export interface SubjectFollowers {
  subject: number
  /** A view into a reused buffer: valid until the iterator advances. */
  followers: Int32Array
}

/**
 * The follow graph, subject by subject (1..n). Memory stays at the model plus one buffer; pass
 * `outDegree` (length n + 1) to have follows per user counted on the way.
 */
export function* followGraph(
  params: UserbaseParams,
  outDegree?: Int32Array,
  model = buildFollowerModel(params),
): Generator<SubjectFollowers> {
  const out = new Int32Array(params.num_users)
  const taken = new Uint8Array((params.num_users >>> 3) + 1)
  for (let subject = 1; subject <= params.num_users; subject++) {
    const k = sampleFollowers(model, params, subject, out, taken)
    const followers = out.subarray(0, k)
    if (outDegree) for (let i = 0; i < k; i++) outDegree[followers[i]!]!++
    yield { subject, followers }
  }
}

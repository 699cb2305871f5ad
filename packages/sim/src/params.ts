// Parameter files: userbases, scenario generators and simulation plans, in the shapes of the seed
// toolkit (snake_case fields), validated with errors that name the bad field.
import { checkArray, Fields, ParamError, show } from './validate.ts'

/** Largest userbase: ids must fit the follow-rkey scheme (ids.ts) and Int32Array indexes. */
export const MAX_USERS = 1_000_000_000

export interface UserbaseParams {
  name: string
  num_users: number
  /** Users 1..max_active_user_id are the active ones: they follow more and they post. */
  max_active_user_id: number
  /** Followers of user r ≈ num_users · follower_density / r. */
  follower_density: number
  /** Optional, default 1. */
  seed: number
  /** Handles are `user<id>.<handle_domain>`; optional, default `sim.test`. */
  handle_domain: string
  /** ISO time the base data ends at: follows and existing posts are dated before it. */
  epoch: string
  /** Optional history of posts loaded with the userbase (active users only). */
  existing_posts?: ExistingPosts
}

export interface ExistingPosts {
  days: number
  tiers: PostsTier[]
}

export interface PostsTier {
  max_followers: number
  posts_per_day: number
}

export interface SessionsTier {
  max_followers: number
  session_minutes: number
  /** Optional, default 1: sessions per simulated day of each user of the tier. */
  sessions_per_day: number
}

export interface FollowsTier {
  max_followers: number
  follows_per_day: number
}

export type ScenarioKind = 'posts' | 'sessions' | 'follows'

interface ScenarioCommon {
  /** Size of the userbase the scenario runs on (follower counts derive from it). */
  n: number
  max_active_user_id: number
  seed: number
  /** Length of the scenario in days; rates are per day. */
  time_units: number
  /** As in the userbase; optional, default 1. */
  follower_density: number
}

export type ScenarioParams =
  | (ScenarioCommon & { kind: 'posts'; tiers: PostsTier[] })
  | (ScenarioCommon & { kind: 'sessions'; tiers: SessionsTier[] })
  | (ScenarioCommon & { kind: 'follows'; tiers: FollowsTier[] })

export interface PlanEntry {
  scenario_name: string
  /** Scenario file, relative to the plan file. */
  path: string
  offset_ms: number
}

export const DEFAULT_HANDLE_DOMAIN = 'sim.test'
export const DEFAULT_EPOCH = '2025-06-01T00:00:00.000Z'

const HOSTNAME = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$/

export function parseUserbaseParams(value: unknown, root = 'userbase'): UserbaseParams {
  const f = new Fields(root, value)
  const name = f.string('name')
  const numUsers = f.number('num_users', 'positive-int')
  if (numUsers < 2 || numUsers > MAX_USERS) {
    throw new ParamError(`${root}.num_users must be between 2 and ${MAX_USERS}, got ${numUsers}`)
  }
  const maxActive = f.number('max_active_user_id', 'positive-int')
  if (maxActive > numUsers) {
    throw new ParamError(
      `${root}.max_active_user_id must be at most num_users (${numUsers}), got ${maxActive}`,
    )
  }
  const density = f.number('follower_density', 'positive')
  const seed = f.number('seed', 'nonnegative-int', 1)
  const domain = f.string('handle_domain', DEFAULT_HANDLE_DOMAIN)
  if (!HOSTNAME.test(domain)) {
    throw new ParamError(
      `${root}.handle_domain must be a lower-case domain name, got ${show(domain)}`,
    )
  }
  const epoch = f.string('epoch', DEFAULT_EPOCH)
  if (Number.isNaN(Date.parse(epoch)) || !epoch.endsWith('Z')) {
    throw new ParamError(`${root}.epoch must be an ISO date-time in UTC, got ${show(epoch)}`)
  }
  const params: UserbaseParams = {
    name,
    num_users: numUsers,
    max_active_user_id: maxActive,
    follower_density: density,
    seed,
    handle_domain: domain,
    epoch: new Date(epoch).toISOString(),
  }
  if (f.has('existing_posts')) {
    const p = new Fields(`${root}.existing_posts`, f.raw('existing_posts'))
    const days = p.number('days', 'positive')
    const tiers = parseTiers(p, (t) => ({
      max_followers: t.number('max_followers', 'nonnegative-int'),
      posts_per_day: t.number('posts_per_day', 'nonnegative'),
    }))
    p.done()
    params.existing_posts = { days, tiers }
  }
  f.done()
  return params
}

const KIND_BY_RATE: [string, ScenarioKind][] = [
  ['posts_per_day', 'posts'],
  ['session_minutes', 'sessions'],
  ['follows_per_day', 'follows'],
]

/**
 * A scenario generator's parameters. The kind comes from `kind` if given, else from the rate
 * field of the first tier (`posts_per_day`, `session_minutes` or `follows_per_day`).
 */
export function parseScenarioParams(value: unknown): ScenarioParams {
  const kind = scenarioKind(value)
  const f = new Fields(kind, value)
  f.raw('kind')
  const maxActive = f.number('max_active_user_id', 'positive-int')
  const n = f.number('n', 'positive-int', maxActive)
  if (maxActive > n) {
    throw new ParamError(`${kind}.max_active_user_id must be at most n (${n}), got ${maxActive}`)
  }
  const common: ScenarioCommon = {
    n,
    max_active_user_id: maxActive,
    seed: f.number('seed', 'nonnegative-int'),
    time_units: f.number('time_units', 'positive'),
    follower_density: f.number('follower_density', 'positive', 1),
  }
  let params: ScenarioParams
  if (kind === 'posts') {
    const tiers = parseTiers(f, (t) => ({
      max_followers: t.number('max_followers', 'nonnegative-int'),
      posts_per_day: t.number('posts_per_day', 'nonnegative'),
    }))
    params = { ...common, kind, tiers }
  } else if (kind === 'sessions') {
    const tiers = parseTiers(f, (t) => ({
      max_followers: t.number('max_followers', 'nonnegative-int'),
      session_minutes: t.number('session_minutes', 'positive'),
      sessions_per_day: t.number('sessions_per_day', 'nonnegative', 1),
    }))
    params = { ...common, kind, tiers }
  } else {
    const tiers = parseTiers(f, (t) => ({
      max_followers: t.number('max_followers', 'nonnegative-int'),
      follows_per_day: t.number('follows_per_day', 'nonnegative'),
    }))
    params = { ...common, kind, tiers }
  }
  f.done()
  return params
}

function scenarioKind(value: unknown): ScenarioKind {
  const f = new Fields('scenario', value)
  if (f.has('kind')) {
    const kind = f.raw('kind')
    const known = KIND_BY_RATE.map(([, k]) => k)
    if (typeof kind !== 'string' || !known.includes(kind as ScenarioKind)) {
      throw new ParamError(`scenario.kind must be one of ${known.join(', ')}, got ${show(kind)}`)
    }
    return kind as ScenarioKind
  }
  const first = f.array('tiers')[0]
  const tier = new Fields('scenario.tiers[0]', first)
  const found = KIND_BY_RATE.filter(([field]) => tier.has(field))
  if (found.length !== 1) {
    const fields = KIND_BY_RATE.map(([field]) => field).join(', ')
    throw new ParamError(`scenario.tiers[0] must have exactly one of ${fields}`)
  }
  return found[0]![1]
}

/** Tiers ordered by strictly increasing max_followers. */
function parseTiers<T extends { max_followers: number }>(f: Fields, one: (t: Fields) => T): T[] {
  const tiers = f.array('tiers').map((value, i) => {
    const t = new Fields(`${f.path}.tiers[${i}]`, value)
    const tier = one(t)
    t.done()
    return tier
  })
  tiers.forEach((tier, i) => {
    const prev = tiers[i - 1]
    if (prev && tier.max_followers <= prev.max_followers) {
      throw new ParamError(
        `${f.path}.tiers[${i}].max_followers must be greater than the previous tier's ` +
          `(${prev.max_followers}), got ${tier.max_followers}`,
      )
    }
  })
  return tiers
}

/** A simulation plan: `[{ scenario_name, path, offset_ms }]`. */
export function parsePlan(value: unknown, root = 'plan'): PlanEntry[] {
  return checkArray(root, value).map((entry, i) => {
    const f = new Fields(`${root}[${i}]`, entry)
    const parsed: PlanEntry = {
      scenario_name: f.string('scenario_name'),
      path: f.string('path'),
      offset_ms: f.number('offset_ms', 'nonnegative-int'),
    }
    f.done()
    return parsed
  })
}

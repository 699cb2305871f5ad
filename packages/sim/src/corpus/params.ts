// Parameters of a recorded firehose corpus: how many events over how many repos, the network's
// mix of actions, how activity and popularity are spread. Every field but `name` has a default
// close to what the live network shows (likes about two thirds of records, a long tail of
// quiet repos, identity and account events rare).
import { DEFAULT_HANDLE_DOMAIN } from '../params.ts'
import { Fields, ParamError } from '../validate.ts'

/** Every action the generator emits; each becomes one firehose event. */
export const ACTIONS = [
  'like',
  'unlike',
  'post',
  'reply',
  'quote',
  'repost',
  'unrepost',
  'follow',
  'unfollow',
  'block',
  'unblock',
  'profile',
  'list',
  'listitem',
  'unlistitem',
  'post_delete',
  'identity',
  'account',
] as const

export type Action = (typeof ACTIONS)[number]

/** Shares of events per action (normalized by their sum). */
export type Mix = Record<Action, number>

export const DEFAULT_MIX: Mix = {
  like: 0.6,
  unlike: 0.03,
  post: 0.07,
  reply: 0.06,
  quote: 0.008,
  repost: 0.07,
  unrepost: 0.005,
  follow: 0.085,
  unfollow: 0.02,
  block: 0.01,
  unblock: 0.002,
  profile: 0.007,
  list: 0.0005,
  listitem: 0.006,
  unlistitem: 0.001,
  post_delete: 0.006,
  identity: 0.0015,
  account: 0.0005,
}

/** What a post, reply or quote carries besides text, as shares of those records. */
export interface PostFeatures {
  images: number
  external: number
  mention: number
}

export const DEFAULT_FEATURES: PostFeatures = { images: 0.25, external: 0.08, mention: 0.12 }

export interface FirehoseParams {
  name: string
  /** Repos of the userbase (user ids 1..repos); activity spreads over all of them. */
  repos: number
  events: number
  seed: number
  /** Average events per second of the stream's own clock (event times and record keys). */
  rate_per_second: number
  /** ISO time of the first event. */
  start: string
  handle_domain: string
  /** Repo activity: the repo of activity rank r acts with weight r^-activity_exponent. */
  activity_exponent: number
  /** Popularity of follow/mention subjects and of liked authors, the same way. */
  popularity_exponent: number
  mix: Mix
  post_features: PostFeatures
}

export const DEFAULT_FIREHOSE: Omit<FirehoseParams, 'name'> = {
  repos: 100_000,
  events: 500_000,
  seed: 1,
  rate_per_second: 1000,
  start: '2026-01-05T12:00:00.000Z',
  handle_domain: DEFAULT_HANDLE_DOMAIN,
  activity_exponent: 0.7,
  popularity_exponent: 1.0,
  mix: DEFAULT_MIX,
  post_features: DEFAULT_FEATURES,
}

export function parseFirehoseParams(value: unknown, root = 'firehose'): FirehoseParams {
  const f = new Fields(root, value)
  const d = DEFAULT_FIREHOSE
  const params: FirehoseParams = {
    name: f.string('name'),
    repos: f.number('repos', 'positive-int', d.repos),
    events: f.number('events', 'positive-int', d.events),
    seed: f.number('seed', 'nonnegative-int', d.seed),
    rate_per_second: f.number('rate_per_second', 'positive', d.rate_per_second),
    start: f.string('start', d.start),
    handle_domain: f.string('handle_domain', d.handle_domain).toLowerCase(),
    activity_exponent: f.number('activity_exponent', 'nonnegative', d.activity_exponent),
    popularity_exponent: f.number('popularity_exponent', 'nonnegative', d.popularity_exponent),
    mix: { ...d.mix },
    post_features: { ...d.post_features },
  }
  if (Number.isNaN(Date.parse(params.start))) {
    throw new ParamError(`${root}.start must be an ISO time, got ${JSON.stringify(params.start)}`)
  }
  params.start = new Date(params.start).toISOString()
  if (params.repos < 2) throw new ParamError(`${root}.repos must be at least 2`)
  if (params.rate_per_second > 1_000_000) {
    // Record keys are microsecond TIDs: two events must not share a microsecond.
    throw new ParamError(`${root}.rate_per_second must be at most 1000000`)
  }
  const mix = f.raw('mix')
  if (mix !== undefined) {
    const m = new Fields(`${root}.mix`, mix)
    // Listed actions replace the defaults; unlisted ones keep theirs (0 turns one off).
    for (const a of ACTIONS) params.mix[a] = m.number(a, 'nonnegative', params.mix[a])
    m.done()
  }
  if (ACTIONS.every((a) => params.mix[a] === 0)) {
    throw new ParamError(`${root}.mix must give some action a share above 0`)
  }
  const features = f.raw('post_features')
  if (features !== undefined) {
    const pf = new Fields(`${root}.post_features`, features)
    for (const k of ['images', 'external', 'mention'] as const) {
      params.post_features[k] = pf.number(k, 'nonnegative', params.post_features[k])
      if (params.post_features[k] > 1) {
        throw new ParamError(`${root}.post_features.${k} must be at most 1`)
      }
    }
    pf.done()
  }
  f.done()
  return params
}

/** The mix as probabilities summing to 1. */
export function mixShares(mix: Mix): Mix {
  const total = ACTIONS.reduce((s, a) => s + mix[a], 0)
  return Object.fromEntries(ACTIONS.map((a) => [a, mix[a] / total])) as Mix
}

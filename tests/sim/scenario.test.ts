// Scenario generators and files: fixed bytes for a seed, the seed's tier semantics, round trips of
// hand-written scenarios, and plans.
import { createHash } from 'node:crypto'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  DAY_MS,
  followersOf,
  generateScenario,
  generateScenarios,
  parseScenario,
  parseScenarioParams,
  readPlan,
  readScenario,
  serializeScenario,
  writeScenario,
} from '@openplane/sim'

const sha = (text: string): string => createHash('sha256').update(text).digest('hex')

// The seed post's examples, verbatim.
const POSTS = {
  n: 100000,
  max_active_user_id: 10000,
  seed: 43,
  time_units: 1,
  tiers: [
    { max_followers: 10, posts_per_day: 0.2 },
    { max_followers: 100, posts_per_day: 1.0 },
    { max_followers: 1000, posts_per_day: 3.0 },
  ],
}
const SESSIONS = {
  n: 100000,
  max_active_user_id: 10000,
  seed: 42,
  time_units: 1,
  tiers: [
    { max_followers: 10, session_minutes: 10 },
    { max_followers: 100, session_minutes: 30 },
    { max_followers: 1000, session_minutes: 60 },
  ],
}
const FOLLOWS = {
  n: 100000,
  max_active_user_id: 10000,
  seed: 44,
  time_units: 1,
  tiers: [
    { max_followers: 10, follows_per_day: 0.5 },
    { max_followers: 1000, follows_per_day: 2 },
  ],
}

const generated = (params: object): string =>
  serializeScenario(generateScenario(parseScenarioParams(params)))

let dir: string
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'sim-scenario-'))
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

describe('scenario generators', () => {
  it('are deterministic: fixed seeds give fixed bytes, other seeds other bytes', () => {
    const hashes = [POSTS, SESSIONS, FOLLOWS].map((p) => sha(generated(p)).slice(0, 16))
    expect(hashes).toEqual(['1151d97ea3831f80', 'bfb017c0595347ba', '796284db63542911'])
    expect(sha(generated(POSTS)).slice(0, 16)).toBe(hashes[0])
    expect(sha(generated({ ...POSTS, seed: 44 }))).not.toBe(sha(generated(POSTS)))
    expect(sha(generated({ ...SESSIONS, seed: 43 }))).not.toBe(sha(generated(SESSIONS)))
  })

  it('posts: active users only, rates by follower tier, within the time span', () => {
    const { posts = [] } = generateScenario(parseScenarioParams(POSTS))
    const perUser = new Map<number, number>()
    for (const p of posts) {
      expect(p.user_id).toBeGreaterThanOrEqual(1)
      expect(p.user_id).toBeLessThanOrEqual(10000)
      expect(p.offset_ms).toBeGreaterThanOrEqual(0)
      expect(p.offset_ms).toBeLessThan(DAY_MS)
      perUser.set(p.user_id, (perUser.get(p.user_id) ?? 0) + 1)
    }
    const offsets = posts.map((p) => p.offset_ms)
    expect(offsets).toEqual([...offsets].sort((a, b) => a - b))
    // With density 1, users 1000..9999 have 10..100 followers: 1 post/day each on average;
    // user 10000 has 10 followers (0.2/day); users below 1000 post 3/day (the last tier).
    const mean = (from: number, to: number): number => {
      let sum = 0
      for (let u = from; u <= to; u++) sum += perUser.get(u) ?? 0
      return sum / (to - from + 1)
    }
    expect(followersOf(1000, 100000, 1)).toBe(100)
    expect(mean(1001, 9999)).toBeGreaterThan(0.9)
    expect(mean(1001, 9999)).toBeLessThan(1.1)
    expect(mean(1, 999)).toBeGreaterThan(2.7)
    expect(mean(1, 999)).toBeLessThan(3.3)
  })

  it('sessions: one a day per active user, duration from the tier', () => {
    const { sessions = [] } = generateScenario(parseScenarioParams(SESSIONS))
    expect(sessions).toHaveLength(10000)
    const byUser = new Map(sessions.map((s) => [s.user_id, s]))
    expect(byUser.size).toBe(10000)
    expect(byUser.get(10000)!.duration_ms).toBe(10 * 60_000)
    expect(byUser.get(5000)!.duration_ms).toBe(30 * 60_000)
    expect(byUser.get(50)!.duration_ms).toBe(60 * 60_000)
  })

  it('follows: popular subjects more often, never oneself, no pair twice', () => {
    const { follows = [] } = generateScenario(parseScenarioParams(FOLLOWS))
    expect(follows.length).toBeGreaterThan(5000)
    const pairs = new Set(follows.map((f) => `${f.user_id}:${f.subject_id}`))
    expect(pairs.size).toBe(follows.length)
    for (const f of follows) expect(f.subject_id).not.toBe(f.user_id)
    const top = follows.filter((f) => f.subject_id <= 10).length
    const tail = follows.filter((f) => f.subject_id > 50_000 && f.subject_id <= 50_010).length
    expect(top).toBeGreaterThan(20 * Math.max(1, tail))
  })

  it('merges several generators into one scenario file that parses back to the same bytes', async () => {
    const merged = generateScenarios([POSTS, SESSIONS].map(parseScenarioParams))
    expect(Object.keys(merged)).toEqual(['posts', 'sessions'])
    const file = path.join(dir, 'merged.json')
    await writeScenario(merged, file)
    const back = await readScenario(file)
    expect(serializeScenario(back)).toBe(serializeScenario(merged))
  })
})

describe('scenario and plan files', () => {
  it('accepts a hand-written scenario and rejects bad events by path', () => {
    const scenario = parseScenario({
      posts: [{ user_id: 1, offset_ms: 0 }],
      follows: [{ user_id: 2, subject_id: 1, offset_ms: 500 }],
    })
    expect(scenario.posts).toHaveLength(1)
    expect(() => parseScenario({ posts: [{ user_id: 1, offset_ms: -5 }] })).toThrow(
      'scenario.posts[0].offset_ms must be a non-negative integer, got -5',
    )
    expect(() =>
      parseScenario({ sessions: [{ user_id: 1, offset_ms: 0, duration_ms: 'long' }] }),
    ).toThrow('scenario.sessions[0].duration_ms must be a positive integer, got "long"')
    expect(() => parseScenario({ follows: [{ user_id: 3, subject_id: 3, offset_ms: 0 }] })).toThrow(
      'scenario.follows[0].subject_id must differ from user_id',
    )
    expect(() => parseScenario({ likes: [] })).toThrow('scenario.likes is not a known field')
    expect(() => parseScenario({})).toThrow('scenario must have at least one of')
  })

  it('reads a plan, resolving scenario paths next to it', async () => {
    const file = path.join(dir, 'plan.json')
    await writeFile(
      file,
      JSON.stringify([
        { scenario_name: 'saturday morning', path: 'saturday_morning.json', offset_ms: 0 },
        { scenario_name: 'shitstorm', path: 'shitstorm.json', offset_ms: 100_000 },
      ]),
    )
    const plan = await readPlan(file)
    expect(plan.map((e) => [e.scenario_name, e.path, e.offset_ms])).toEqual([
      ['saturday morning', path.join(dir, 'saturday_morning.json'), 0],
      ['shitstorm', path.join(dir, 'shitstorm.json'), 100_000],
    ])
    await writeFile(file, JSON.stringify([{ scenario_name: 'x', path: 'x.json', offset_ms: 1.5 }]))
    await expect(readPlan(file)).rejects.toThrow(
      `${file}: plan[0].offset_ms must be a non-negative integer, got 1.5`,
    )
  })
})

// Parameter files: invalid ones are rejected with the bad field named, by the API and by the CLI.
import { spawnSync } from 'node:child_process'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parsePlan, parseScenarioParams, parseUserbaseParams } from '@openplane/sim'

const root = path.resolve(import.meta.dirname, '../..')
const USERBASE = { name: 'u', num_users: 1000, max_active_user_id: 100, follower_density: 5 }
const POSTS = {
  n: 1000,
  max_active_user_id: 100,
  seed: 1,
  time_units: 1,
  tiers: [{ max_followers: 10, posts_per_day: 1 }],
}

let dir: string
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'sim-params-'))
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

describe('userbase parameters', () => {
  it('accepts the seed shape and fills the optional fields', () => {
    expect(parseUserbaseParams(USERBASE)).toEqual({
      ...USERBASE,
      seed: 1,
      handle_domain: 'sim.test',
      epoch: '2025-06-01T00:00:00.000Z',
    })
  })

  it.each([
    [{ follower_density: 'x' }, 'userbase.follower_density must be a positive number, got "x"'],
    [{ follower_density: 0 }, 'userbase.follower_density must be a positive number, got 0'],
    [{ num_users: 10.5 }, 'userbase.num_users must be a positive integer, got 10.5'],
    [{ num_users: 1 }, 'userbase.num_users must be between 2 and 1000000000, got 1'],
    [{ max_active_user_id: 5000 }, 'userbase.max_active_user_id must be at most num_users (1000)'],
    [{ name: '' }, 'userbase.name must be a non-empty string, got ""'],
    [{ name: undefined }, 'userbase.name is required (a string)'],
    [{ handle_domain: 'Bad Domain' }, 'userbase.handle_domain must be a lower-case domain name'],
    [{ epoch: 'yesterday' }, 'userbase.epoch must be an ISO date-time in UTC'],
    [{ num_user: 5 }, 'userbase.num_user is not a known field'],
    [
      { existing_posts: { days: 1, tiers: [{ max_followers: 5, posts_per_day: -1 }] } },
      'userbase.existing_posts.tiers[0].posts_per_day must be a non-negative number, got -1',
    ],
  ])('rejects %j', (change, message) => {
    expect(() => parseUserbaseParams({ ...USERBASE, ...change })).toThrow(message)
  })
})

describe('scenario parameters', () => {
  it('tells the kind from the tiers and defaults n and follower_density', () => {
    const { n: _n, ...withoutN } = POSTS
    expect(parseScenarioParams(withoutN)).toMatchObject({
      kind: 'posts',
      n: 100,
      follower_density: 1,
    })
    const sessions = parseScenarioParams({
      ...POSTS,
      tiers: [{ max_followers: 10, session_minutes: 30 }],
    })
    expect(sessions).toMatchObject({ kind: 'sessions', tiers: [{ sessions_per_day: 1 }] })
  })

  it.each([
    [{ time_units: -1 }, 'posts.time_units must be a positive number, got -1'],
    [{ seed: undefined }, 'posts.seed is required (a non-negative integer)'],
    [{ max_active_user_id: 5000 }, 'posts.max_active_user_id must be at most n (1000)'],
    [{ tiers: [] }, 'scenario.tiers must not be empty'],
    [{ tiers: [{ max_followers: 10 }] }, 'scenario.tiers[0] must have exactly one of'],
    [
      {
        tiers: [
          { max_followers: 10, posts_per_day: 1 },
          { max_followers: 10, posts_per_day: 2 },
        ],
      },
      "posts.tiers[1].max_followers must be greater than the previous tier's (10), got 10",
    ],
    [
      {
        tiers: [
          { max_followers: 10, posts_per_day: 1 },
          { max_followers: 100, session_minutes: 2 },
        ],
      },
      'posts.tiers[1].posts_per_day is required (a non-negative number)',
    ],
    [{ kind: 'likes' }, 'scenario.kind must be one of posts, sessions, follows, got "likes"'],
  ])('rejects %j', (change, message) => {
    expect(() => parseScenarioParams({ ...POSTS, ...change })).toThrow(message)
  })

  it('rejects bad plans', () => {
    expect(() => parsePlan({})).toThrow('plan must be an array, got {}')
    expect(() => parsePlan([{ scenario_name: 'a', offset_ms: 0 }])).toThrow(
      'plan[0].path is required (a string)',
    )
  })
})

describe('the CLI', () => {
  const sim = (...args: string[]) =>
    spawnSync(process.execPath, [path.join(root, 'packages/sim/src/cli.ts'), ...args], {
      encoding: 'utf8',
    })

  it('names the file and the field, and exits 2', async () => {
    const file = path.join(dir, 'userbase.json')
    await writeFile(file, JSON.stringify({ ...USERBASE, follower_density: 'x' }))
    const run = sim('generate-userbase', file)
    expect(run.status).toBe(2)
    expect(run.stderr).toContain(
      `error: ${file}: userbase.follower_density must be a positive number, got "x"`,
    )
    await writeFile(file, '{ "name": ')
    expect(sim('check', file).stderr).toContain(`error: ${file}: not valid JSON`)
  })

  it('checks the example files', () => {
    const examples = path.join(root, 'packages/sim/examples')
    const run = sim(
      'check',
      ...[
        'userbase-100k.json',
        'userbase-1m.json',
        'userbase-100k-with-posts.json',
        'saturday-morning.posts.json',
        'saturday-morning.sessions.json',
        'shitstorm.posts.json',
        'saturday-morning.json',
        'shitstorm.json',
        'plan.json',
      ].map((f) => path.join(examples, f)),
    )
    expect(run.stderr).toBe('')
    expect(run.status).toBe(0)
  })

  it('reproduces the checked-in example scenarios byte for byte', async () => {
    const examples = path.join(root, 'packages/sim/examples')
    const out = path.join(dir, 'shitstorm.json')
    const run = sim('generate-scenario', path.join(examples, 'shitstorm.posts.json'), '--out', out)
    expect(run.status).toBe(0)
    expect(await readFile(out, 'utf8')).toBe(
      await readFile(path.join(examples, 'shitstorm.json'), 'utf8'),
    )
  })
})

// The userbase generator: deterministic bytes for a seed, the follower law held exactly, a
// heavy-tailed out-degree, and identifiers that look like atproto's.
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { describe, expect, it } from 'vitest'
import {
  cidFor,
  didFor,
  followGraph,
  followersOf,
  idForDid,
  parseUserbaseParams,
  percentiles,
  tid,
  totalFollows,
  writeUserbaseRows,
  TABLES,
  type RowSinks,
  type Table,
  type UserbaseParams,
} from '@openplane/sim'

const base = (over: Partial<UserbaseParams> = {}): UserbaseParams =>
  parseUserbaseParams({
    name: 'test',
    num_users: 3000,
    max_active_user_id: 300,
    follower_density: 3,
    seed: 7,
    ...over,
  })

/** SHA-256 of the follow pairs as `generate-userbase --out` writes them. */
function graphHash(params: UserbaseParams): string {
  const hash = createHash('sha256')
  for (const { subject, followers } of followGraph(params)) {
    let text = ''
    for (const f of followers) text += `${f}\t${subject}\n`
    hash.update(text)
  }
  return hash.digest('hex')
}

/** SHA-256 of every COPY line, per table, as the loader would send them. */
async function rowsHash(params: UserbaseParams): Promise<Record<Table, string>> {
  const hashes = Object.fromEntries(
    Object.keys(TABLES).map((t) => [t, createHash('sha256')]),
  ) as Record<Table, ReturnType<typeof createHash>>
  const sinks = Object.fromEntries(
    Object.keys(TABLES).map((t) => [
      t,
      {
        push: (line: string) => {
          hashes[t as Table].update(line)
          return undefined
        },
      },
    ]),
  ) as RowSinks
  await writeUserbaseRows(params, sinks)
  return Object.fromEntries(
    Object.entries(hashes).map(([t, h]) => [t, h.digest('hex').slice(0, 16)]),
  ) as Record<Table, string>
}

describe('userbase generator', () => {
  it('is deterministic: a fixed seed gives fixed bytes, another seed other bytes', () => {
    const hash = graphHash(base())
    expect(hash).toBe('34503e7660494b8e23eab07266ad93b45d0cfb9f432654c6467dc725c9f2dc52')
    expect(graphHash(base())).toBe(hash)
    expect(graphHash(base({ seed: 8 }))).not.toBe(hash)
  })

  it('writes the same bytes through the CLI (generate-userbase --out)', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'sim-userbase-'))
    try {
      const params = path.join(dir, 'userbase.json')
      const out = path.join(dir, 'follows.tsv')
      await writeFile(
        params,
        JSON.stringify({
          name: 'test',
          num_users: 3000,
          max_active_user_id: 300,
          follower_density: 3,
          seed: 7,
        }),
      )
      const cli = path.resolve(import.meta.dirname, '../../packages/sim/src/cli.ts')
      const run = spawnSync(process.execPath, [cli, 'generate-userbase', params, '--out', out], {
        encoding: 'utf8',
      })
      expect(run.status).toBe(0)
      expect(run.stdout).toMatch(/out-degree p50 \d+ {2}p99 \d+ {2}max \d+/)
      const bytes = await readFile(out)
      expect(createHash('sha256').update(bytes).digest('hex')).toBe(graphHash(base()))
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })

  it('gives every subject exactly followersOf(r) distinct followers, never itself', () => {
    const params = base({ num_users: 5000, follower_density: 4 })
    let total = 0
    const wrong: string[] = []
    for (const { subject, followers } of followGraph(params)) {
      const distinct = new Set(followers)
      if (followers.length !== followersOf(subject, 5000, 4)) wrong.push(`count of ${subject}`)
      if (distinct.size !== followers.length) wrong.push(`duplicates in ${subject}`)
      if (distinct.has(subject)) wrong.push(`${subject} follows itself`)
      if (followers.some((f) => f < 1 || f > 5000)) wrong.push(`bad id in ${subject}`)
      total += followers.length
    }
    expect(wrong).toEqual([])
    expect(total).toBe(totalFollows(5000, 4))
  })

  it('follows the power law: ranks 1, 10, 100, 1000 have about n·density/r followers', () => {
    const n = 20_000
    const density = 5
    const params = base({ num_users: n, max_active_user_id: 1000, follower_density: density })
    const counts = new Map<number, number>()
    for (const { subject, followers } of followGraph(params)) {
      if ([1, 10, 100, 1000].includes(subject)) counts.set(subject, followers.length)
      if (subject === 1000) break
    }
    expect(counts.get(1)).toBe(n - 1) // followed by everyone
    for (const r of [10, 100, 1000]) {
      const expected = (n * density) / r
      expect(Math.abs(counts.get(r)! - expected) / expected).toBeLessThan(0.01)
    }
  })

  it('has a heavy-tailed out-degree: active users follow more, a few follow thousands', () => {
    const n = 20_000
    const params = base({ num_users: n, max_active_user_id: 1000, follower_density: 5 })
    const out = new Int32Array(n + 1)
    for (const _ of followGraph(params, out));
    const p = percentiles(out)
    expect(p.p99).toBeGreaterThan(8 * p.p50)
    expect(p.max).toBeGreaterThan(2000)
    expect(out.filter((d) => d >= 1000).length).toBeGreaterThan(5)
    const mean = (from: number, to: number): number => {
      let sum = 0
      for (let i = from; i <= to; i++) sum += out[i]!
      return sum / (to - from + 1)
    }
    expect(mean(1, 1000)).toBeGreaterThan(2 * mean(1001, n))
  })

  it('produces deterministic rows for every table', async () => {
    const params = base({
      num_users: 500,
      max_active_user_id: 50,
      existing_posts: { days: 2, tiers: [{ max_followers: 100000, posts_per_day: 2 }] },
    })
    const hashes = await rowsHash(params)
    expect(hashes).toEqual({
      actor: '508fe911bc960edc',
      feed_item: 'e56e07840008d79b',
      follow: '089781d60f0c172b',
      post: '0f71ce2ee071d4f6',
      profile: '54af3980b35bcb5c',
      profile_agg: 'f9af73b04ed4acf4',
      record: '460a0614bd375232',
    })
    expect(await rowsHash({ ...params, seed: 99 })).not.toEqual(hashes)
  })
})

describe('identifiers', () => {
  it('derives distinct did:plc DIDs that map back to their ids', () => {
    const seen = new Set<string>()
    for (let id = 1; id <= 50_000; id++) {
      const did = didFor(id)
      expect(did).toMatch(/^did:plc:[a-z2-7]{24}$/)
      seen.add(did)
    }
    expect(seen.size).toBe(50_000)
    expect(idForDid(didFor(12345), 50_000)).toBe(12345)
    expect(idForDid(didFor(40_000_000), 40_000_000)).toBe(40_000_000)
    expect(idForDid(didFor(12345), 100)).toBeUndefined()
    expect(idForDid('did:plc:aaaaaaaaaaaaaaaaaaaaaaaa', 1e9)).toBeUndefined()
  })

  it('writes TIDs and CIDs in the atproto formats', () => {
    // A real follow key and its createdAt (same millisecond), from a stock-indexed test network.
    expect(tid(Date.parse('2026-11-22T22:47:14.714Z') * 1000, 0).slice(0, 8)).toBe('3n2wp35b')
    expect(tid(0, 0)).toBe('2222222222222')
    expect(cidFor(1, 2, 3)).toMatch(/^bafyrei[a-z2-7]{52}$/)
    expect(cidFor(1, 2, 3)).toBe(cidFor(1, 2, 3))
    expect(cidFor(1, 2, 4)).not.toBe(cidFor(1, 2, 3))
  })
})

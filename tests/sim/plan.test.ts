// The plan runner: events in plan order at speed, scenarios joined through the control endpoint
// land in the exported plan so a replay dispatches the identical sequence; bad plan and scenario
// files are rejected naming the field; sessions and firehose-lag probes against our dataplane.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { connectNodeAdapter } from '@connectrpc/connect-node'
import { createPgDb, type Db } from '@openplane/db'
import { createIdentity } from '@openplane/identity'
import { Service } from '@openplane/proto'
import { startServer, type DataplaneServer } from '@openplane/server'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  cidFor,
  didFor,
  loadUserbase,
  parsePlan,
  parseUserbaseParams,
  readPlan,
  readReplay,
  startRun,
  summarize,
  tid,
  userbaseFollowerOf,
  type EventSink,
  type PlanEvent,
  type RunResult,
} from '@openplane/sim'
import { PG_URL, uniqueName } from '../harness/env.ts'

let dir: string
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'sim-plan-'))
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

const write = async (name: string, value: unknown): Promise<string> => {
  const file = path.join(dir, name)
  await writeFile(file, typeof value === 'string' ? value : JSON.stringify(value, null, 2))
  return file
}

/** A sink that records every call, in call order, and resolves at once. */
function recordingSink(log: string[]): EventSink {
  let n = 0
  return {
    post: async (user) => {
      log.push(`post ${user}`)
      return { uri: `at://${didFor(user)}/app.bsky.feed.post/${++n}` }
    },
    follow: async (user, subject) => {
      log.push(`follow ${user} ${subject}`)
    },
  }
}

const describeEvent = (e: PlanEvent): string =>
  e.kind === 'follow'
    ? `${e.at} follow ${e.user_id} ${e.subject_id}`
    : e.kind === 'post'
      ? `${e.at} post ${e.user_id}`
      : `${e.at} session ${e.user_id} ${e.duration_ms}`

// Plan time: ~4 s of events; at speed 4 a run takes ~1 s.
const SPEED = 4
const morning = {
  posts: Array.from({ length: 80 }, (_, i) => ({ user_id: 1 + (i % 17), offset_ms: i * 50 })),
  follows: Array.from({ length: 30 }, (_, i) => ({
    user_id: 20 + i,
    subject_id: 1 + (i % 5),
    offset_ms: i * 130,
  })),
  sessions: [
    { user_id: 3, duration_ms: 1500, offset_ms: 100 },
    { user_id: 4, duration_ms: 800, offset_ms: 2000 },
  ],
}
// Unsorted on purpose, with ties: the run orders events itself.
const burst = {
  follows: [
    { user_id: 99, subject_id: 2, offset_ms: 300 },
    { user_id: 98, subject_id: 2, offset_ms: 0 },
  ],
  posts: [
    { user_id: 97, offset_ms: 200 },
    { user_id: 92, offset_ms: 0 },
    { user_id: 91, offset_ms: 0 },
    ...Array.from({ length: 30 }, (_, i) => ({ user_id: 40 + i, offset_ms: 20 * i })),
  ],
}

describe('plan runner', () => {
  it('joins a scenario via the control endpoint; replaying the exported plan is identical', async () => {
    await write('morning.json', morning)
    const burstFile = await write('burst.json', burst)
    const planFile = await write('plan.json', [
      { scenario_name: 'morning', path: 'morning.json', offset_ms: 0 },
      { scenario_name: 'morning again', path: 'morning.json', offset_ms: 700 },
    ])
    const outDir = path.join(dir, 'live')
    const calls: string[] = []
    const events: string[] = []
    const run = await startRun({
      plan: await readPlan(planFile),
      sink: recordingSink(calls),
      speed: SPEED,
      controlPort: 0,
      outDir,
      label: 'live',
      onEvent: (e, dropped) => {
        expect(dropped).toBe(false)
        events.push(describeEvent(e))
      },
    })
    expect(run.controlUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)

    await sleep(350)
    const res = await fetch(`${run.controlUrl}/scenarios`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ scenario_name: 'burst', path: burstFile }),
    })
    expect(res.status).toBe(201)
    const joined = (await res.json()) as { scenario_name: string; path: string; offset_ms: number }
    expect(joined).toMatchObject({ scenario_name: 'burst', path: '../burst.json' })
    // Joined at the current runtime offset (plan time = wall × speed).
    expect(joined.offset_ms).toBeGreaterThanOrEqual(350 * SPEED - 50)
    expect(joined.offset_ms).toBeLessThan(3000)

    const plan = (await (await fetch(`${run.controlUrl}/plan`)).json()) as unknown[]
    expect(plan).toHaveLength(3)
    // The export is written on every change, in the plan format.
    const exported = parsePlan(JSON.parse(await readFile(path.join(outDir, 'plan.json'), 'utf8')))
    expect(exported.map((e) => e.scenario_name)).toEqual(['morning', 'morning again', 'burst'])
    expect(exported[2]!.offset_ms).toBe(joined.offset_ms)

    const live = await run.done
    expect(live.data.stopped_by).toBe('end')
    expect(live.data.plan.map((e) => e.joined)).toEqual([false, false, true])
    const total = 2 * (80 + 30 + 2) + 2 + 33
    expect(events).toHaveLength(total)
    expect(calls).toHaveLength(total - 4)
    // Dispatch order is plan time order.
    const times = events.map((e) => Number(e.split(' ')[0]))
    expect(times).toEqual([...times].sort((a, b) => a - b))
    // The burst's same-time events in the series' order: by user, follows before posts.
    const at0 = events.filter((e) => e.startsWith(`${joined.offset_ms} `))
    expect(at0.filter((e) => / (follow 98 2|post 9[12])$/.test(e))).toEqual([
      `${joined.offset_ms} follow 98 2`,
      `${joined.offset_ms} post 91`,
      `${joined.offset_ms} post 92`,
    ])
    const s = summarize(live.data)
    expect(s.posts.dispatched).toBe(2 * 80 + 33)
    expect(s.posts.created).toBe(2 * 80 + 33)
    expect(s.follows.dispatched).toBe(2 * 30 + 2)
    expect(s.posts.dropped + s.follows.dropped).toBe(0)
    expect(s.sessionsStarted).toBe(4)
    expect(await readFile(path.join(outDir, 'report.html'), 'utf8')).toContain('<svg')

    // Replay the run directory: the same calls, at the same plan times.
    const replay = await readReplay(outDir)
    expect(replay.speed).toBe(SPEED)
    const again: string[] = []
    const againEvents: string[] = []
    const second = await (
      await startRun({
        plan: replay.plan,
        sink: recordingSink(again),
        speed: replay.speed,
        outDir: path.join(dir, 'replay'),
        label: 'replay',
        onEvent: (e) => againEvents.push(describeEvent(e)),
      })
    ).done
    expect(again).toEqual(calls)
    expect(againEvents).toEqual(events)
    expect(second.data.plan.map(({ joined: _, ...e }) => e)).toEqual(
      live.data.plan.map(({ joined: _, ...e }) => e),
    )
  })

  it('stops at the maximum duration; a stopped run replays up to where it stopped', async () => {
    const planFile = await write('plan-short.json', [
      { scenario_name: 'morning', path: 'morning.json', offset_ms: 0 },
    ])
    const calls: string[] = []
    const bounded = await (
      await startRun({
        plan: await readPlan(planFile),
        sink: recordingSink(calls),
        speed: SPEED,
        maxDurationMs: 1000,
      })
    ).done
    expect(bounded.data.stopped_by).toBe('duration')
    expect(bounded.data.end_offset_ms).toBe(1000)
    // Posts at 0, 50, ..., 1000 and follows at 0, 130, ..., 910.
    expect(calls.filter((c) => c.startsWith('post'))).toHaveLength(21)
    expect(calls.filter((c) => c.startsWith('follow'))).toHaveLength(8)

    const outDir = path.join(dir, 'stopped')
    const first: string[] = []
    const run = await startRun({
      plan: await readPlan(planFile),
      sink: recordingSink(first),
      speed: SPEED,
      outDir,
    })
    await sleep(300)
    run.stop()
    const stopped = await run.done
    expect(stopped.data.stopped_by).toBe('stop')
    const replay = await readReplay(outDir)
    expect(replay.maxDurationMs).toBe(stopped.data.end_offset_ms)
    const second: string[] = []
    await (
      await startRun({
        plan: replay.plan,
        sink: recordingSink(second),
        speed: replay.speed,
        maxDurationMs: replay.maxDurationMs!,
      })
    ).done
    expect(second).toEqual(first)
  })

  it('counts drops beyond the sink backpressure limit, and failures', async () => {
    const planFile = await write('plan-drop.json', [
      { scenario_name: 'morning', path: 'morning.json', offset_ms: 0 },
    ])
    const stuck: (() => void)[] = []
    let posts = 0
    const sink: EventSink = {
      // Posts never resolve until the end; follows fail.
      post: () => new Promise((resolve) => stuck.push(() => resolve({ uri: `at://x/${++posts}` }))),
      follow: () => Promise.reject(new Error('emitter refused')),
    }
    const run = await startRun({
      plan: await readPlan(planFile),
      sink,
      speed: 8,
      maxInFlight: 5,
      maxDurationMs: 1000,
    })
    await sleep(400)
    for (const release of stuck) release()
    const { data } = await run.done
    const s = summarize(data)
    expect(s.posts.dispatched).toBeGreaterThanOrEqual(4)
    expect(s.posts.dropped).toBe(21 - s.posts.dispatched)
    expect(s.posts.dropped).toBeGreaterThan(0)
    expect(s.follows.failed + s.follows.dropped).toBe(8)
    expect(data.errors.some((e) => e.message === 'sink follow: emitter refused')).toBe(true)
  })

  it('rejects invalid plan and scenario files naming the file and the field', async () => {
    const badPlan = await write('bad-plan.json', [
      { scenario_name: 'morning', path: 'morning.json', offset_ms: 0 },
      { scenario_name: 'late', path: 'morning.json', offset: 5 },
    ])
    await expect(readPlan(badPlan)).rejects.toThrow(
      `${badPlan}: plan[1].offset_ms is required (a non-negative integer)`,
    )
    const negative = await write('neg-plan.json', [
      { scenario_name: 'm', path: 'morning.json', offset_ms: -1 },
    ])
    await expect(readPlan(negative)).rejects.toThrow('plan[0].offset_ms must be')
    const badScenario = await write('bad-scenario.json', {
      posts: [
        { user_id: 1, offset_ms: 0 },
        { user_id: 'two', offset_ms: 5 },
      ],
    })
    const planFile = await write('plan-bad-scenario.json', [
      { scenario_name: 'bad', path: 'bad-scenario.json', offset_ms: 0 },
    ])
    await expect(
      startRun({ plan: await readPlan(planFile), sink: recordingSink([]) }),
    ).rejects.toThrow(`${badScenario}: scenario.posts[1].user_id must be a positive integer`)

    // Through the control endpoint: 400 with the field named; the run carries on.
    const ok = await write('plan-ok.json', [
      { scenario_name: 'morning', path: 'morning.json', offset_ms: 0 },
    ])
    const run = await startRun({
      plan: await readPlan(ok),
      sink: recordingSink([]),
      speed: SPEED,
      controlPort: 0,
      maxDurationMs: 4000,
    })
    const post = (body: unknown) =>
      fetch(`${run.controlUrl}/scenarios`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      })
    const missing = await post({ scenario_name: 'x' })
    expect(missing.status).toBe(400)
    expect(((await missing.json()) as { error: string }).error).toBe(
      'request.path is required (a string)',
    )
    const extra = await post({ scenario_name: 'x', path: badScenario, offset_ms: 3 })
    expect(((await extra.json()) as { error: string }).error).toMatch(
      /^request\.offset_ms is not a known field/,
    )
    const invalid = await post({ scenario_name: 'x', path: badScenario })
    expect(invalid.status).toBe(400)
    expect(((await invalid.json()) as { error: string }).error).toBe(
      `${badScenario}: scenario.posts[1].user_id must be a positive integer, got "two"`,
    )
    const nowhere = await post({ scenario_name: 'x', path: path.join(dir, 'nope.json') })
    expect(((await nowhere.json()) as { error: string }).error).toMatch(/nope\.json: cannot read/)
    const { data } = await run.done
    expect(data.plan).toHaveLength(1)
  })
})

describe('timeline targets', () => {
  it('detects an HTTP/1.1-only gRPC dataplane; AppView requests carry admin auth as the user', async () => {
    // Like the stock dataplane (an express app): gRPC over HTTP/1.1 only.
    const asked: string[] = []
    const dataplane = http.createServer(
      connectNodeAdapter({
        routes: (router) =>
          router.service(Service, {
            ping: async () => ({}),
            getTimeline: async (req) => {
              asked.push(req.actorDid)
              return { items: [{ uri: 'at://x/app.bsky.feed.post/1' }], cursor: '' }
            },
          }),
      }),
    )
    const seen: { url?: string; headers: http.IncomingHttpHeaders }[] = []
    const appview = http.createServer((req, res) => {
      seen.push({ url: req.url, headers: req.headers })
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ feed: [{ post: { uri: 'at://x/app.bsky.feed.post/1' } }] }))
    })
    const listen = (server: http.Server) =>
      new Promise<string>((resolve) =>
        server.listen(0, '127.0.0.1', () =>
          resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`),
        ),
      )
    try {
      const [dataplaneUrl, appviewUrl] = [await listen(dataplane), await listen(appview)]
      const file = await write('two-sessions.json', {
        sessions: [
          { user_id: 5, duration_ms: 600, offset_ms: 0 },
          { user_id: 6, duration_ms: 600, offset_ms: 0 },
        ],
      })
      const planFile = await write('plan-two.json', [
        { scenario_name: 'two', path: path.basename(file), offset_ms: 0 },
      ])
      const result = await (
        await startRun({
          plan: await readPlan(planFile),
          sink: recordingSink([]),
          dataplaneUrl,
          appview: { url: appviewUrl, adminPassword: 'hunter2' },
          speed: 2,
          sessionIntervalMs: 100,
          timelineLimit: 20,
        })
      ).done
      expect(result.data.settings.http_version).toBe('1.1')
      const s = summarize(result.data)
      expect(s.targets.dataplane!.ok).toBeGreaterThan(4)
      expect(s.targets.dataplane!.errors).toBe(0)
      expect(s.targets.appview!.ok).toBeGreaterThan(4)
      expect(s.targets.appview!.errors).toBe(0)
      expect(new Set(asked)).toEqual(new Set([didFor(5), didFor(6)]))
      expect(seen[0]!.url).toBe('/xrpc/app.bsky.feed.getTimeline?limit=20')
      expect(seen[0]!.headers.authorization).toBe(
        `Basic ${Buffer.from('admin:hunter2').toString('base64')}`,
      )
      expect(new Set(seen.map((r) => r.headers['appview-as-did']))).toEqual(
        new Set([didFor(5), didFor(6)]),
      )
    } finally {
      dataplane.close()
      appview.close()
    }
  })
})

describe('sessions and firehose lag against our dataplane', () => {
  const N = 300
  const params = parseUserbaseParams({
    name: 'sessions',
    num_users: N,
    max_active_user_id: 60,
    follower_density: 5,
    seed: 7,
    existing_posts: { days: 2, tiers: [{ max_followers: 100000, posts_per_day: 3 }] },
  })
  const schema = uniqueName('sim_plan')
  let db: Db
  let server: DataplaneServer
  let pool: pg.Pool

  beforeAll(async () => {
    await loadUserbase(params, { url: PG_URL, schema })
    db = createPgDb({ url: PG_URL, schema, poolSize: 5 })
    server = await startServer({
      host: '127.0.0.1',
      port: 0,
      ctx: { db: db.db, identity: createIdentity({ plcUrl: 'http://127.0.0.1:1' }) },
    })
    pool = new pg.Pool({ connectionString: PG_URL, max: 2 })
  })
  afterAll(async () => {
    await server?.close()
    await db?.close()
    await pool?.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
    await pool?.end()
  })

  /** Stands in for emitter + indexer: the post is in the index 80 ms after it was emitted. */
  function indexingSink(): EventSink {
    let n = 0
    return {
      async post(user) {
        const did = didFor(user)
        const now = Date.now()
        const uri = `at://${did}/app.bsky.feed.post/${tid(now * 1000 + ++n, 7)}`
        const cid = cidFor(user, n, 99)
        const at = new Date(now).toISOString()
        setTimeout(() => {
          void pool.query(
            `WITH p AS (INSERT INTO ${schema}.post (uri, cid, creator, text, "createdAt", "indexedAt")
                        VALUES ($1, $2, $3, 'sim', $4, $4))
             INSERT INTO ${schema}.feed_item (uri, cid, type, "postUri", "originatorDid", "sortAt")
             VALUES ($1, $2, 'post', $1, $3, $4)`,
            [uri, cid, did, at],
          )
        }, 80)
        return { uri }
      },
      follow: async () => undefined,
    }
  }

  it('session ticks call GetTimeline with real latencies; lag probes see posts arrive', async () => {
    const file = await write('sessions.json', {
      sessions: Array.from({ length: 12 }, (_, i) => ({
        user_id: 1 + i * 7,
        duration_ms: 2400,
        offset_ms: i * 40,
      })),
      posts: Array.from({ length: 12 }, (_, i) => ({ user_id: 2 + (i % 4), offset_ms: 200 * i })),
    })
    const planFile = await write('plan-sessions.json', [
      { scenario_name: 'sessions', path: path.basename(file), offset_ms: 0 },
    ])
    const run = await startRun({
      plan: await readPlan(planFile),
      sink: indexingSink(),
      dataplaneUrl: server.url,
      speed: 2,
      sessionIntervalMs: 200,
      timelineLimit: 50,
      controlPort: 0,
      lag: {
        followerOf: userbaseFollowerOf(params),
        sampleEvery: 2,
        pollMs: 20,
        timeoutMs: 30_000,
      },
      outDir: path.join(dir, 'sessions'),
      label: 'ours',
    })
    await sleep(700)
    const metrics = await (await fetch(`${run.controlUrl}/metrics`)).text()
    const lines = metrics.split('\n')
    const buckets = lines.filter((l) => l.startsWith('sim_request_duration_seconds_bucket{'))
    expect(buckets.some((l) => /target="dataplane"/.test(l) && /outcome="ok"/.test(l))).toBe(true)
    expect(buckets.every((l) => l.includes('run="ours"'))).toBe(true)
    expect(lines.find((l) => l.startsWith('sim_active_sessions{'))).toMatch(/ [1-9]\d*$/)
    const status = (await (await fetch(`${run.controlUrl}/status`)).json()) as {
      active_sessions: number
    }
    expect(status.active_sessions).toBeGreaterThan(0)
    const result: RunResult = await run.done

    expect(result.data.settings.http_version).toBe('2')
    const s = summarize(result.data)
    const dp = s.targets.dataplane!
    // 12 sessions × 1.2 s wall, a tick every 100 ms: about 12 requests each on an idle machine,
    // fewer when the runner is starved of CPU (ticks due while one is late are not queued), and
    // never fewer than each session's first. The counts, not the pace, are what is checked.
    expect(dp.ok).toBeGreaterThanOrEqual(12)
    expect(dp.errors).toBe(0)
    expect(dp.p50).toBeGreaterThan(0)
    expect(dp.max).toBeGreaterThanOrEqual(dp.p99!)
    expect(dp.throughput).toBeGreaterThan(0)
    expect(s.sessionsStarted).toBe(12)
    expect(s.maxActiveSessions).toBeGreaterThan(5)
    // Every other post was probed; each showed up after the 80 ms "indexing" delay.
    expect(s.lag.samples).toBe(6)
    expect(s.lag.timeouts).toBe(0)
    expect(s.lag.p50).toBeGreaterThanOrEqual(80)
    expect(s.cpuSeconds).toBeGreaterThan(0)
  })

  it('speaks gRPC over HTTP/1.1 when told to; appview failures are counted with messages', async () => {
    const file = await write('one-session.json', {
      sessions: [{ user_id: 5, duration_ms: 600, offset_ms: 0 }],
    })
    const planFile = await write('plan-one.json', [
      { scenario_name: 'one', path: path.basename(file), offset_ms: 0 },
    ])
    const result = await (
      await startRun({
        plan: await readPlan(planFile),
        sink: recordingSink([]),
        dataplaneUrl: server.url,
        httpVersion: '1.1',
        speed: 2,
        sessionIntervalMs: 100,
        appview: { url: 'http://127.0.0.1:1', adminPassword: 'x' },
        requestTimeoutMs: 500,
      })
    ).done
    const s = summarize(result.data)
    expect(s.targets.dataplane!.ok).toBeGreaterThan(3)
    expect(s.targets.appview!.errors).toBeGreaterThan(0)
    expect(result.data.errors.some((e) => e.message.startsWith('appview: '))).toBe(true)
  })
})

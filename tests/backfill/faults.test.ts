// What a backfill does with PDSes that misbehave: every repo ends done or failed with its reason,
// retries follow the documented policy, and the run itself never fails.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { BackfillStats } from '@openplane/backfill'
import { startOurBackfill, type OurBackfill } from '../harness/backfill.ts'
import { startFakePds, type FakeAccount, type FakePds } from '../harness/fake-pds.ts'

const did = (name: string) => `did:plc:${name.padEnd(24, 'x')}`

const ACCOUNTS: FakeAccount[] = [
  { did: did('good'), script: [{ kind: 'repo' }], posts: 3 },
  { did: did('garbage'), script: [{ kind: 'bytes', body: new Uint8Array([1, 2, 3, 4, 5, 6]) }] },
  {
    did: did('truncated'),
    script: [{ kind: 'bytes', body: new Uint8Array([0x3a, 0xa2, 0x65, 0x72, 0x6f]) }],
  },
  { did: did('forged'), script: [{ kind: 'repo' }], wrongKey: true },
  {
    did: did('flaky'),
    script: [{ kind: 'status', status: 500 }, { kind: 'status', status: 502 }, { kind: 'repo' }],
  },
  {
    did: did('limited'),
    script: [
      { kind: 'status', status: 429, error: 'RateLimitExceeded', headers: { 'retry-after': '1' } },
      { kind: 'repo' },
    ],
  },
  { did: did('gone'), script: [{ kind: 'status', status: 400, error: 'RepoDeactivated' }] },
  { did: did('silent'), script: [{ kind: 'silence' }] },
  { did: did('stalls'), script: [{ kind: 'cut' }] },
]

describe('backfill: PDS faults', () => {
  let pds: FakePds
  let ours: OurBackfill
  let stats: BackfillStats
  let rows: Map<string, { state: string; reason: string | null }>
  beforeAll(async () => {
    pds = await startFakePds(ACCOUNTS)
    ours = await startOurBackfill({ plcUrl: pds.url })
    await ours.backfill().repos.enqueue([...ACCOUNTS.map((a) => a.did), did('unknown')])
    stats = await ours
      .backfill({
        verify: true,
        maxAttempts: 3,
        connectTimeoutMs: 500,
        idleTimeoutMs: 500,
        concurrency: 4,
      })
      .run({ drain: true })
    const all = await ours.db.db.selectFrom('openplane_repo').selectAll().execute()
    rows = new Map(all.map((r) => [r.did, r]))
  }, 120_000)
  afterAll(async () => {
    await ours?.close()
    await pds?.close()
  })

  const state = (name: string) => rows.get(did(name))

  it('indexes a good repo, verified', async () => {
    expect(state('good')).toMatchObject({ state: 'done', reason: null })
    const posts = await ours.db.db
      .selectFrom('post')
      .select('uri')
      .where('creator', '=', did('good'))
      .execute()
    expect(posts).toHaveLength(3)
  })

  it('fails a malformed CAR with its reason, without retrying it', () => {
    expect(state('garbage')).toMatchObject({ state: 'failed' })
    expect(state('garbage')!.reason).toMatch(/CAR/)
    expect(state('truncated')).toMatchObject({ state: 'failed' })
    expect(pds.requests.get(did('garbage'))).toHaveLength(1)
  })

  it('fails a repo whose commit is not signed by the DID document key', () => {
    expect(state('forged')).toMatchObject({ state: 'failed' })
    expect(state('forged')!.reason).toMatch(/signature/)
  })

  it('retries 5xx answers with backoff until the repo comes', () => {
    expect(state('flaky')).toMatchObject({ state: 'done' })
    expect(pds.requests.get(did('flaky'))).toHaveLength(3)
  })

  it('waits as long as a 429 says before asking the host again', () => {
    expect(state('limited')).toMatchObject({ state: 'done' })
    const [first, second] = pds.requests.get(did('limited'))!
    expect(second! - first!).toBeGreaterThanOrEqual(950)
  })

  it('fails a repo the PDS says is gone, once', () => {
    expect(state('gone')!.reason).toMatch(/RepoDeactivated/)
    expect(pds.requests.get(did('gone'))).toHaveLength(1)
  })

  it('gives up on silence and stalled bodies after the attempts allowed', () => {
    expect(state('silent')).toMatchObject({ state: 'failed' })
    expect(state('silent')!.reason).toMatch(/no answer in time/)
    expect(pds.requests.get(did('silent'))).toHaveLength(3)
    expect(state('stalls')).toMatchObject({ state: 'failed' })
    expect(state('stalls')!.reason).toMatch(/stalled/)
  })

  it('fails a DID that does not resolve', () => {
    expect(state('unknown')!.reason).toMatch(/does not resolve/)
  })

  it('counts what it did', () => {
    expect(stats.done).toBe(3)
    expect(stats.failed).toBe(7)
    expect(stats.records).toBe(3 + 2 + 2)
  })
})

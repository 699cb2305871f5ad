// The recorded firehose: the generator's mix matches its parameters and is a pure function of
// them (fixed seed, fixed bytes); a recording served back is byte for byte what was recorded, from
// any cursor, at a rate or at full speed; every commit is a valid signed sync-v1.1 commit (its
// ops undo to prevData) that the stock's parser reads.
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { parseCommitUnauthenticated } from '@atproto/sync'
import { decodeAll } from '@atproto/lex-cbor'
import {
  ACTIONS,
  checkCommitFrame,
  CorpusReader,
  FirehoseGenerator,
  mixShares,
  parseFirehoseParams,
  recordFirehose,
  ReplayServer,
} from '@openplane/sim'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import WebSocket from 'ws'
import { SimKeys } from '../../packages/sim/src/emit/keys.ts'
import { didFor, idForDid } from '../../packages/sim/src/ids.ts'
import { wellKnown } from '../harness/well-known.ts'

let dir = ''
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'opfh-'))
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

const small = (over: Record<string, unknown> = {}) =>
  parseFirehoseParams({ name: 'test', repos: 300, events: 1500, seed: 7, ...over })

/** Every message a consumer receives until `count` arrived (or the server closes). */
async function receive(
  url: string,
  cursor: number | undefined,
  count: number,
  waitMs = 10_000,
): Promise<Buffer[]> {
  const target = new URL('/xrpc/com.atproto.sync.subscribeRepos', url)
  if (cursor !== undefined) target.searchParams.set('cursor', String(cursor))
  const ws = new WebSocket(target)
  const got: Buffer[] = []
  let finished = false
  return new Promise((resolve, reject) => {
    const done = () => {
      finished = true
      ws.terminate()
      resolve(got)
    }
    const timer = setTimeout(done, waitMs)
    ws.on('message', (data: Buffer) => {
      // Frames already read off the socket still arrive after terminate().
      if (finished) return
      got.push(data)
      if (got.length >= count) {
        clearTimeout(timer)
        done()
      }
    })
    ws.on('close', () => {
      clearTimeout(timer)
      resolve(got)
    })
    ws.on('error', reject)
  })
}

const seqOf = (message: Uint8Array): number => {
  const [, body] = [...decodeAll(message)] as [unknown, { seq: number }]
  return body.seq
}

describe('generator', () => {
  it('emits the mix of its parameters, over a power law of repos', () => {
    const params = parseFirehoseParams({ name: 'mix', repos: 20_000, events: 60_000, seed: 3 })
    const gen = new FirehoseGenerator(params)
    const perRepo = new Map<number, number>()
    for (let s = gen.next(); s; s = gen.next()) perRepo.set(s.user, (perRepo.get(s.user) ?? 0) + 1)
    const shares = mixShares(params.mix)
    for (const a of ACTIONS) {
      const expected = shares[a] * params.events
      const got = gen.counts[a]
      // Binomial spread (5σ) plus a little for deletes that found nothing yet and fell back.
      const slack = 5 * Math.sqrt(expected) + 0.05 * expected + 5
      expect(Math.abs(got - expected), `${a}: ${got} vs ${expected.toFixed(0)}`).toBeLessThan(slack)
    }
    expect(gen.counts.like / params.events).toBeGreaterThan(0.55)
    // A few very active repos, a long tail: the busiest acts far above the mean, and most repos
    // of the userbase appear at least once.
    const counts = [...perRepo.values()].sort((a, b) => b - a)
    expect(counts[0]!).toBeGreaterThan(50 * (params.events / params.repos))
    expect(perRepo.size).toBeGreaterThan(params.repos * 0.6)
  })

  it('is a pure function of its parameters: fixed seed, fixed bytes', async () => {
    const a = await recordFirehose(small(), path.join(dir, 'a.firehose'), { signers: 0 })
    const b = await recordFirehose(small(), path.join(dir, 'b.firehose'), { signers: 2 })
    const c = await recordFirehose(small({ seed: 8 }), path.join(dir, 'c.firehose'))
    expect(a.frames).toBe(1500)
    expect(b.sha256).toBe(a.sha256)
    expect(c.sha256).not.toBe(a.sha256)
    // Pinned: a change here means every recorded corpus changes with the generator (bump
    // GENERATOR_VERSION with it).
    expect(a.sha256).toBe(PINNED_SHA256)
  })
})

// sha256 of the messages of small() (seed 7, 300 repos, 1500 events), GENERATOR_VERSION 2.
const PINNED_SHA256 = '6cdf5baafd824a64c47c94fdbf23341a8ebd9caae96753a3c4e2a33be1048aef'

describe('record and replay', () => {
  let file = ''
  const recorded = new Map<number, Uint8Array>()
  let corpus: CorpusReader
  let server: ReplayServer

  beforeAll(async () => {
    file = path.join(dir, 'replay.firehose')
    await recordFirehose(small({ seed: 9 }), file, {
      onFrame: (seq, bytes) => recorded.set(seq, bytes),
    })
    corpus = await CorpusReader.open(file)
    server = await ReplayServer.start({ corpus })
  })
  afterAll(async () => {
    await server?.close()
    await corpus?.close()
  })

  it('serves exactly the recorded bytes, from the start and from a cursor', async () => {
    const all = await receive(server.url, 0, 1500)
    expect(all).toHaveLength(1500)
    for (const [i, m] of all.entries()) expect(Buffer.compare(m, recorded.get(i + 1)!)).toBe(0)
    const tail = await receive(server.url, 1234, 266)
    expect(tail.map(seqOf)).toEqual(Array.from({ length: 266 }, (_, i) => 1235 + i))
    // Without a cursor a consumer starts at the live head: at full speed, past the last frame.
    expect(await receive(server.url, undefined, 1, 300)).toEqual([])
  })

  it('answers a future cursor with FutureCursor', async () => {
    const [frame] = await receive(server.url, 99_999, 1)
    const [header, body] = [...decodeAll(frame!)] as [{ op: number }, { error: string }]
    expect(header.op).toBe(-1)
    expect(body.error).toBe('FutureCursor')
  })

  it('releases frames at its rate, the head moving in real time', async () => {
    const paced = await ReplayServer.start({ corpus, rate: 200, headStart: 100 })
    try {
      const t0 = performance.now()
      const got = await receive(paced.url, 0, 160)
      const secs = (performance.now() - t0) / 1000
      expect(got.map(seqOf)).toEqual(Array.from({ length: 160 }, (_, i) => i + 1))
      // 100 were out at once; the other 60 take 0.3 s at 200 events/s.
      expect(secs).toBeGreaterThan(0.2)
      // A live consumer (no cursor) starts at the head, not at the start.
      const live = await receive(paced.url, undefined, 1)
      expect(seqOf(live[0]!)).toBeGreaterThan(100)
      expect(paced.status().head).toBeGreaterThan(100)
    } finally {
      await paced.close()
    }
  })

  it('answers identity lookups for the corpus users', async () => {
    const did = didFor(42)
    const doc = (await (await fetch(`${server.httpUrl}/${did}`)).json()) as { id: string }
    expect(doc.id).toBe(did)
    expect(await wellKnown(server.httpUrl, 'user42.sim.test')).toBe(did)
    expect(await wellKnown(server.httpUrl, 'user301.sim.test')).toBeUndefined()
    expect((await fetch(`${server.httpUrl}/${didFor(301)}`)).status).toBe(404)
    // Keys recorded with the corpus (no derivation when serving) are the users' real keys.
    const keys = new SimKeys({ seed: 9 })
    const recordedKeys = Object.entries(corpus.summary.public_keys ?? {})
    expect(recordedKeys.length).toBeGreaterThan(100)
    for (const [id, key] of recordedKeys.slice(0, 20)) {
      expect(key).toBe(keys.publicKeyMultibase(Number(id)))
      const served = (await (await fetch(`${server.httpUrl}/${didFor(Number(id))}`)).json()) as {
        verificationMethod: { publicKeyMultibase: string }[]
      }
      expect(served.verificationMethod[0]!.publicKeyMultibase).toBe(key)
    }
  })

  it('holds valid signed commits of every kind, which the stock parser reads', async () => {
    const keys = new SimKeys({ seed: 9 })
    const actions = new Set<string>()
    for await (const { bytes } of corpus.messages()) {
      const [header, body] = [...decodeAll(bytes)] as [
        { t: string },
        { repo: string; ops: { action: string; path: string }[] },
      ]
      if (header.t !== '#commit') continue
      const id = idForDid(body.repo, 300)!
      await checkCommitFrame(bytes, keys.didKey(id))
      const ops = await parseCommitUnauthenticated({
        ...body,
        $type: 'com.atproto.sync.subscribeRepos#commit',
      } as never)
      expect(ops).toHaveLength(1)
      actions.add(`${ops[0]!.event} ${ops[0]!.collection}`)
    }
    for (const want of [
      'create app.bsky.feed.like',
      'delete app.bsky.feed.like',
      'create app.bsky.feed.post',
      'delete app.bsky.feed.post',
      'create app.bsky.graph.follow',
      'delete app.bsky.graph.follow',
      'update app.bsky.actor.profile',
    ]) {
      expect(actions).toContain(want)
    }
  })
})

// Simulated repos against the reference implementation: through random creates, updates and
// deletes (down to an empty repo and back) the in-memory MST stays the canonical tree, the one
// @atproto/repo builds from the same keys, and each commit serializes exactly the nodes that are
// new; every commit's #commit frame proves its ops and undoes to prevData (checkCommitFrame, sync
// v1.1); a stock consumer (@atproto/sync) authenticates the frames and reads each op from them.
import { createRequire } from 'node:module'
import { pathToFileURL } from 'node:url'
import { decode } from '@atproto/lex-cbor'
import { Frame } from '@atproto/xrpc-server'
import { checkCommitFrame, didFor, Rng, tid } from '@openplane/sim'
import { beforeAll, describe, expect, it } from 'vitest'
import { type Block, CborWriter, type CidBin } from '../../packages/sim/src/emit/cbor.ts'
import { commitFrame } from '../../packages/sim/src/emit/firehose.ts'
import { SimKeys } from '../../packages/sim/src/emit/keys.ts'
import { Mst, type OpAction } from '../../packages/sim/src/emit/mst.ts'
import {
  followRecord,
  postRecord,
  type RepoWrite,
  signedCommit,
  SimRepo,
} from '../../packages/sim/src/emit/repos.ts'
import { ReferenceMst, referenceMstRoot } from '../../packages/sim/src/emit/verify.ts'

const SEED = 23
const COLLECTIONS = ['app.bsky.feed.post', 'app.bsky.feed.like', 'app.bsky.graph.follow']
const CREATED_AT = '2025-01-01T00:00:00.000Z'
/** Record keys are TIDs of random instants over about a year: new keys land anywhere in a tree. */
const T0 = Date.parse('2024-06-01T00:00:00Z') * 1000

const w = new CborWriter()
let records = 0

/** A record block not seen before (its CID is new), of a kind fitting the collection. */
function newRecord(collection: string): Block {
  const n = ++records
  return collection === 'app.bsky.graph.follow'
    ? followRecord(w, didFor(1 + (n % 1000)), new Date(Date.parse(CREATED_AT) + n).toISOString())
    : postRecord(w, `record ${n}`, CREATED_AT)
}

/** What a repo should hold: its paths and their current CIDs, and @atproto/repo's tree of them. */
class Expected {
  readonly cids = new Map<string, CidBin>()
  private readonly paths: string[] = []
  private readonly index = new Map<string, number>()
  readonly ref: ReferenceMst

  private constructor(ref: ReferenceMst) {
    this.ref = ref
  }

  static async create(): Promise<Expected> {
    return new Expected(await ReferenceMst.create())
  }

  get size(): number {
    return this.paths.length
  }

  pick(rng: Rng): string {
    return this.paths[rng.int(this.paths.length)]!
  }

  async apply(action: OpAction, path: string, cid: CidBin | null): Promise<void> {
    if (action === 'create') {
      this.index.set(path, this.paths.length)
      this.paths.push(path)
      await this.ref.add(path, cid!)
    } else if (action === 'update') {
      await this.ref.update(path, cid!)
    } else {
      // Swap-remove keeps picking a random path O(1).
      const i = this.index.get(path)!
      const last = this.paths.pop()!
      if (last !== path) {
        this.paths[i] = last
        this.index.set(last, i)
      }
      this.index.delete(path)
      this.cids.delete(path)
      await this.ref.delete(path)
      return
    }
    this.cids.set(path, cid!)
  }
}

interface Phase {
  /** Odds of a create (of a fresh key) and of an update; a delete otherwise. */
  pCreate: number
  pUpdate: number
  until: (records: number) => boolean
}

/** Phases of a repo's life: grow to `size`, shrink to nothing, grow a little again. */
function* phases(size: number): Generator<Phase> {
  yield { pCreate: 0.65, pUpdate: 0.15, until: (n) => n >= size }
  yield { pCreate: 0.1, pUpdate: 0.15, until: (n) => n === 0 }
  yield { pCreate: 0.8, pUpdate: 0.1, until: (n) => n >= Math.ceil(size / 4) }
}

/** A write picked at random as the phase has it, on a path not `taken` by the same commit. */
function randomWrite(rng: Rng, exp: Expected, phase: Phase, taken?: Set<string>): RepoWrite {
  const x = rng.float()
  let untaken = exp.size
  for (const path of taken ?? []) if (exp.cids.has(path)) untaken--
  const action: OpAction =
    untaken === 0 || x < phase.pCreate
      ? 'create'
      : x < phase.pCreate + phase.pUpdate
        ? 'update'
        : 'delete'
  if (action === 'create') {
    for (;;) {
      const collection = COLLECTIONS[rng.int(COLLECTIONS.length)]!
      const rkey = tid(T0 + rng.int(2 ** 31) * 16384, rng.int(1024))
      const path = `${collection}/${rkey}`
      if (exp.cids.has(path) || taken?.has(path)) continue
      taken?.add(path)
      return { action, collection, rkey, record: newRecord(collection) }
    }
  }
  for (;;) {
    const path = exp.pick(rng)
    if (taken?.has(path)) continue
    taken?.add(path)
    const [collection, rkey] = path.split('/') as [string, string]
    return action === 'update'
      ? { action, collection, rkey, record: newRecord(collection) }
      : { action, collection, rkey }
  }
}

let steps = 0
/**
 * Lets the event loop run now and then: awaiting the reference's promises alone never does, and a
 * long loop would starve the test runner's messages to its worker.
 */
async function breathe(): Promise<void> {
  if (++steps % 100 === 0) await new Promise((resolve) => setImmediate(resolve))
}

type Node = { e: { t: { bytes: Uint8Array } | null }[]; l: { bytes: Uint8Array } | null }
const bin = (cid: { bytes: Uint8Array }) => Buffer.from(cid.bytes).toString('latin1')

describe('Mst', () => {
  it('stays the canonical tree through random creates, updates and deletes, serializing exactly the new nodes', async () => {
    // Every block ever serialized, and each node's children, to list the nodes of any root.
    const store = new Map<CidBin, Uint8Array>()
    const children = new Map<CidBin, CidBin[]>()
    const nodesOf = (root: CidBin): Set<CidBin> => {
      const seen = new Set<CidBin>()
      const stack = [root]
      while (stack.length) {
        const cid = stack.pop()!
        if (seen.has(cid)) continue
        seen.add(cid)
        let kids = children.get(cid)
        if (!kids) {
          const bytes = store.get(cid)
          if (!bytes) throw new Error('a node of the tree was never serialized')
          const node = decode(bytes) as unknown as Node
          kids = [node.l, ...node.e.map((e) => e.t)].filter((c) => c !== null).map(bin)
          children.set(cid, kids)
        }
        stack.push(...kids)
      }
      return seen
    }

    for (const [seed, size] of [
      [1, 3000],
      [2, 500],
      [3, 40],
    ] as const) {
      const rng = new Rng(SEED, seed)
      let deletesWithProof = 0
      const mst = new Mst()
      const exp = await Expected.create()
      const out: Block[] = []
      let root = mst.commit(w, out)
      for (const b of out) store.set(b.cid, b.bytes)
      expect(root).toBe(await exp.ref.root())
      let ops = 0
      for (const phase of phases(size)) {
        while (!phase.until(exp.size)) {
          await breathe()
          const { action, collection, rkey, record } = randomWrite(rng, exp, phase)
          const path = `${collection}/${rkey}`
          const before = exp.cids.get(path) ?? null
          if (action === 'create') mst.add(path, record!.cid)
          else if (action === 'update') expect(mst.update(path, record!.cid)).toBe(before)
          else expect(mst.delete(path)).toBe(before)
          await exp.apply(action, path, record ? record.cid : null)
          expect(mst.size).toBe(exp.size)
          expect(mst.get(path)).toBe(record ? record.cid : null)

          out.length = 0
          const prevRoot = root
          root = mst.commit(w, out)
          expect(root).toBe(await exp.ref.root())
          for (const b of out) store.set(b.cid, b.bytes)
          // The blocks a commit serializes are the nodes of the new tree that the old one lacks
          // (checked on every op of the smaller trees, every 25th of the big one).
          // Proof blocks beyond them are nodes of the new tree the commit did not change: none
          // for an update (its path is all new), some for a delete when its search path runs
          // into an untouched subtree.
          const proof = [...out]
          mst.proveOp(action, path, w, proof)
          const extra = proof.slice(out.length).map((b) => b.cid)
          if (action === 'update') expect(extra).toEqual([])
          if (action === 'delete' && extra.length > 0) deletesWithProof++
          if (size <= 500 || ++ops % 25 === 0) {
            const now = nodesOf(root)
            const old = nodesOf(prevRoot)
            const fresh = [...now].filter((cid) => !old.has(cid))
            expect(new Set(out.map((b) => b.cid))).toEqual(new Set(fresh))
            expect(out).toHaveLength(fresh.length)
            for (const cid of extra) expect(now.has(cid) && old.has(cid)).toBe(true)
          }
        }
        // The reference kept up op by op is also the tree built from scratch.
        expect(root).toBe(await referenceMstRoot(exp.cids))
      }
      expect(deletesWithProof).toBeGreaterThan(0)
    }
  })

  it('refuses to update or delete a missing key, leaving the tree as it was', () => {
    const mst = new Mst()
    const out: Block[] = []
    expect(() => mst.delete('app.bsky.feed.post/a')).toThrow('record not found')
    const a = newRecord('app.bsky.feed.post')
    mst.add('app.bsky.feed.post/a', a.cid)
    const root = mst.commit(w, out)
    expect(() => mst.update('app.bsky.feed.post/b', a.cid)).toThrow('record not found')
    expect(() => mst.delete('app.bsky.feed.post/0')).toThrow('record not found')
    out.length = 0
    expect(mst.commit(w, out)).toBe(root)
    expect(out).toEqual([])
  })
})

describe('SimRepo commits', () => {
  const keys = new SimKeys({ seed: SEED })
  let us = Date.parse('2025-02-01T00:00:00Z') * 1000
  const nextRev = () => tid(us++, 7)
  let seq = 0

  /** Commits, signs and frames the writes; returns the frame and the prepared commit. */
  async function emit(repo: SimRepo, id: number, writes: RepoWrite[]) {
    const prepared = repo.commit(w, writes, nextRev())
    const sig = await keys.keypair(id).sign(prepared.unsigned)
    const signed = signedCommit(w, prepared, sig)
    return { prepared, frame: commitFrame(w, ++seq, new Date().toISOString(), signed) }
  }

  it('every commit of random creates, updates and deletes checks out, down to an empty repo and back', async () => {
    const repos = [
      { id: 1, size: 600 },
      { id: 2, size: 200 },
      { id: 3, size: 60 },
      { id: 4, size: 8 },
    ]
    const rng = new Rng(SEED, 100)
    const live = await Promise.all(
      repos.map(async ({ id, size }) => ({
        id,
        repo: new SimRepo(didFor(id), keys.keypair(id)),
        exp: await Expected.create(),
        phases: phases(size),
        phase: null as Phase | null,
        data: null as CidBin | null,
        done: false,
      })),
    )
    const seen = { create: 0, update: 0, delete: 0, emptied: 0 }
    for (;;) {
      await breathe()
      // Repos take turns at random, so commits of different repos interleave.
      const busy = live.filter((r) => !r.done)
      if (busy.length === 0) break
      const r = busy[rng.int(busy.length)]!
      if (!r.phase || r.phase.until(r.exp.size)) {
        const next = r.phases.next()
        if (next.done) {
          r.done = true
          continue
        }
        r.phase = next.value
      }
      const write = randomWrite(rng, r.exp, r.phase)
      const path = `${write.collection}/${write.rkey}`
      const prev = r.exp.cids.get(path) ?? null
      const { prepared, frame } = await emit(r.repo, r.id, [write])
      await r.exp.apply(write.action, path, write.record ? write.record.cid : null)
      seen[write.action]++
      if (r.exp.size === 0) seen.emptied++

      expect(prepared.ops).toEqual([
        { action: write.action, path, cid: write.record ? write.record.cid : null, prev },
      ])
      expect(prepared.prevData).toBe(r.data)
      expect(prepared.data).toBe(await r.exp.ref.root())
      expect(r.repo.records).toBe(r.exp.size)
      expect(r.repo.recordCid(write.collection, write.rkey)).toBe(write.record?.cid ?? null)
      r.data = prepared.data
      const checked = await checkCommitFrame(frame, keys.didKey(r.id))
      expect(checked.ops).toEqual([{ action: write.action, path }])
      expect(checked.inverted).toBe(prepared.prevData !== null)
    }
    for (const r of live) expect(r.data).toBe(await referenceMstRoot(r.exp.cids))
    // Each repo was emptied (a small one maybe more than once) and filled again.
    expect(seen.emptied).toBeGreaterThanOrEqual(repos.length)
    expect(Math.min(seen.create, seen.update, seen.delete)).toBeGreaterThan(300)
  })

  it('commits of several ops check out, each undone in turn', async () => {
    const rng = new Rng(SEED, 200)
    const repo = new SimRepo(didFor(5), keys.keypair(5))
    const exp = await Expected.create()
    let commits = 0
    for (const phase of phases(400)) {
      while (!phase.until(exp.size)) {
        await breathe()
        const taken = new Set<string>()
        const writes = Array.from({ length: 1 + rng.int(12) }, () =>
          randomWrite(rng, exp, phase, taken),
        )
        const { prepared, frame } = await emit(repo, 5, writes)
        for (const op of prepared.ops) await exp.apply(op.action, op.path, op.cid)
        expect(prepared.data).toBe(await exp.ref.root())
        const checked = await checkCommitFrame(frame, keys.didKey(5))
        expect(checked.ops.map((o) => o.action)).toEqual(writes.map((x) => x.action))
        commits++
      }
    }
    expect(commits).toBeGreaterThan(50)

    // Two creates of identical records share one block.
    const record = postRecord(w, 'same', CREATED_AT)
    const { prepared, frame } = await emit(repo, 5, [
      { action: 'create', collection: 'app.bsky.feed.post', rkey: 'same1', record },
      { action: 'create', collection: 'app.bsky.feed.post', rkey: 'same2', record },
    ])
    expect(prepared.blocks.filter((b) => b.cid === record.cid)).toHaveLength(1)
    await checkCommitFrame(frame, keys.didKey(5))
  })

  it('refuses a commit it cannot make, leaving the repo as it was', async () => {
    const repo = new SimRepo(didFor(6), keys.keypair(6))
    const col = 'app.bsky.feed.post'
    const a = newRecord(col)
    const first = await emit(repo, 6, [{ action: 'create', collection: col, rkey: 'a', record: a }])
    const refused: [RepoWrite[], string][] = [
      [[{ action: 'create', collection: col, rkey: 'a', record: a }], 'exists'],
      [[{ action: 'update', collection: col, rkey: 'b', record: a }], 'not found'],
      [[{ action: 'delete', collection: col, rkey: 'b' }], 'not found'],
      [[{ action: 'delete', collection: col, rkey: 'a', record: a }], 'a delete has no record'],
      [[{ action: 'update', collection: col, rkey: 'a' }], 'needs a record'],
      [[{ action: 'create', collection: col, rkey: 'a/b', record: a }], 'invalid record path'],
      [[], 'ops, got 0'],
      [
        [
          { action: 'create', collection: col, rkey: 'b', record: a },
          { action: 'delete', collection: col, rkey: 'b' },
        ],
        'two ops on',
      ],
      [
        [
          { action: 'delete', collection: col, rkey: 'a' },
          { action: 'update', collection: col, rkey: 'c', record: a },
        ],
        'not found',
      ],
    ]
    for (const [writes, message] of refused) {
      expect(() => repo.commit(w, writes, nextRev())).toThrow(message)
    }
    expect(() =>
      repo.commit(w, [{ action: 'delete', collection: col, rkey: 'a' }], first.prepared.rev),
    ).toThrow('is not after')
    expect(repo.records).toBe(1)
    const next = await emit(repo, 6, [{ action: 'delete', collection: col, rkey: 'a' }])
    expect(next.prepared.prevData).toBe(first.prepared.data)
    expect(next.prepared.ops[0]!.prev).toBe(a.cid)
    await expect(checkCommitFrame(next.frame, keys.didKey(6))).resolves.toMatchObject({
      inverted: true,
    })
  })

  it('a delete whose undoing reads untouched nodes fails the check without them', async () => {
    // A bare tree mirrors the repo to tell the commit's new nodes from the proof blocks.
    const repo = new SimRepo(didFor(10), keys.keypair(10))
    const mirror = new Mst()
    const rng = new Rng(SEED, 400)
    const exp = await Expected.create()
    const grow: Phase = { pCreate: 1, pUpdate: 0, until: () => false }
    for (let i = 0; i < 200; i++) {
      const write = randomWrite(rng, exp, grow)
      await emit(repo, 10, [write])
      mirror.add(`${write.collection}/${write.rkey}`, write.record!.cid)
      await exp.apply('create', `${write.collection}/${write.rkey}`, write.record!.cid)
    }
    mirror.commit(w, [])
    let stripped = 0
    while (exp.size > 0) {
      await breathe()
      const path = exp.pick(rng)
      const [collection, rkey] = path.split('/') as [string, string]
      const prepared = repo.commit(w, [{ action: 'delete', collection, rkey }], nextRev())
      await exp.apply('delete', path, null)
      mirror.delete(path)
      const fresh: Block[] = []
      expect(mirror.commit(w, fresh)).toBe(prepared.data)
      const isNew = new Set(fresh.map((b) => b.cid))
      const sig = await keys.keypair(10).sign(prepared.unsigned)
      const signed = signedCommit(w, prepared, sig)
      await checkCommitFrame(commitFrame(w, ++seq, CREATED_AT, signed), keys.didKey(10))
      if (signed.blocks.every((b) => isNew.has(b.cid))) continue
      const bare = { ...signed, blocks: signed.blocks.filter((b) => isNew.has(b.cid)) }
      await expect(
        checkCommitFrame(commitFrame(w, ++seq, CREATED_AT, bare), keys.didKey(10)),
      ).rejects.toThrow(/: delete .*block not found/)
      stripped++
    }
    expect(stripped).toBeGreaterThan(0)
  })

  it('create() is a commit of one create, framed without prev', async () => {
    const repo = new SimRepo(didFor(7), keys.keypair(7))
    const record = newRecord('app.bsky.feed.post')
    const prepared = repo.create(w, 'app.bsky.feed.post', 'x', record, nextRev())
    expect(prepared).toMatchObject({ path: 'app.bsky.feed.post/x', recordCid: record.cid })
    expect(prepared.ops).toEqual([
      { action: 'create', path: 'app.bsky.feed.post/x', cid: record.cid, prev: null },
    ])
    const sig = await keys.keypair(7).sign(prepared.unsigned)
    const frame = commitFrame(w, 1, CREATED_AT, signedCommit(w, prepared, sig))
    const body = Frame.fromBytes(frame).body as { ops: Record<string, unknown>[] }
    expect(Object.keys(body.ops[0]!).sort()).toEqual(['action', 'cid', 'path'])
  })
})

describe('a stock consumer (@atproto/sync)', () => {
  type CommitEvt = {
    event: string
    uri: { toString(): string }
    cid?: { toString(): string }
    record?: Record<string, unknown>
  }
  type ParseCommit = (
    idResolver: unknown,
    evt: unknown,
    matchCollection?: null,
  ) => Promise<CommitEvt[]>
  let parseCommitAuthenticated: ParseCommit

  beforeAll(async () => {
    // @atproto/sync is what the stock indexer reads the firehose with; it comes with
    // @atproto/bsky, so it is resolved from there.
    const require = createRequire(createRequire(import.meta.url).resolve('@atproto/bsky'))
    const sync = (await import(pathToFileURL(require.resolve('@atproto/sync')).href)) as {
      parseCommitAuthenticated: ParseCommit
    }
    parseCommitAuthenticated = sync.parseCommitAuthenticated
  })

  it('authenticates commits of creates, updates and deletes and reads each op', async () => {
    const keys = new SimKeys({ seed: SEED })
    const did = didFor(8)
    const repo = new SimRepo(did, keys.keypair(8))
    // parseCommitAuthenticated asks its resolver for the repo's signing key and nothing else.
    const resolverWith = (key: string) => ({
      did: { resolveAtprotoKey: async (d: string) => (d === did ? key : '') },
    })
    const resolver = resolverWith(keys.didKey(8))
    let us = Date.parse('2025-03-01T00:00:00Z') * 1000
    const col = 'app.bsky.feed.post'
    const emit = async (writes: RepoWrite[]) => {
      const prepared = repo.commit(w, writes, tid(us++, 3))
      const sig = await keys.keypair(8).sign(prepared.unsigned)
      const frame = commitFrame(w, 1, CREATED_AT, signedCommit(w, prepared, sig))
      await checkCommitFrame(frame, keys.didKey(8))
      return Frame.fromBytes(frame).body
    }
    // Some records first, so the tree has depth and the ops land inside it.
    const rng = new Rng(SEED, 300)
    for (let i = 0; i < 150; i++) {
      const rkey = tid(T0 + rng.int(2 ** 31) * 16384, 0)
      await emit([{ action: 'create', collection: col, rkey, record: newRecord(col) }])
    }
    const a = postRecord(w, 'a', CREATED_AT)
    const a2 = postRecord(w, 'a, edited', CREATED_AT)
    const b = postRecord(w, 'b', CREATED_AT)
    const bodies = [
      await emit([{ action: 'create', collection: col, rkey: tid(T0 + 5e11, 1), record: a }]),
      await emit([{ action: 'update', collection: col, rkey: tid(T0 + 5e11, 1), record: a2 }]),
      await emit([
        { action: 'create', collection: col, rkey: tid(T0 + 6e11, 1), record: b },
        { action: 'delete', collection: col, rkey: tid(T0 + 5e11, 1) },
      ]),
    ]
    const events = []
    for (const body of bodies) events.push(await parseCommitAuthenticated(resolver, body))
    const uri = (t: number) => `at://${did}/${col}/${tid(T0 + t, 1)}`
    const summary = events.map((evts) =>
      evts.map((e) => [e.event, e.uri.toString(), e.record?.text ?? null]),
    )
    expect(summary).toEqual([
      [['create', uri(5e11), 'a']],
      [['update', uri(5e11), 'a, edited']],
      [
        ['create', uri(6e11), 'b'],
        ['delete', uri(5e11), null],
      ],
    ])
    // Signed by another key, the same commit is refused.
    await expect(
      parseCommitAuthenticated(resolverWith(keys.didKey(9)), bodies[1]),
    ).rejects.toThrow()
  })
})

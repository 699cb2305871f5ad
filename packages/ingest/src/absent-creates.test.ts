import { describe, expect, it } from 'vitest'
import { absentCreates } from './absent-creates.ts'
import { brokenChains } from './chain.ts'
import type { CommitOp, IngestEvent } from './events.ts'

const A = 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa'
const B = 'did:plc:bbbbbbbbbbbbbbbbbbbbbbbb'
const TIME = '2026-03-01T12:00:00.000Z'
let seq = 0

const op = (action: CommitOp['action'], rkey: string): CommitOp => ({
  action,
  collection: 'app.bsky.feed.post',
  rkey,
})
const commit = (did: string, since: string | null, rev: string, ops: CommitOp[]): IngestEvent => ({
  type: 'commit',
  seq: ++seq,
  time: TIME,
  did,
  commit: 'bafy',
  rev,
  since,
  ops,
})

/** The creates known absent, as prepare.ts finds them from the revs indexed. */
function absent(batch: IngestEvent[], indexed: [string, string][], failed: string[] = []) {
  const chains = brokenChains(batch, new Map(indexed))
  const found = absentCreates(batch, chains.chained, new Set([...chains.repos, ...failed]))
  return batch.flatMap((e) => (e.type === 'commit' ? e.ops.filter((o) => found.has(o)) : []))
}

describe('absentCreates: creates a repo chained to the index cannot find', () => {
  it('takes the creates of commits following the indexed rev, and of those chained after them', () => {
    const c1 = op('create', 'p1')
    const c2 = op('create', 'p2')
    const up = op('update', 'p0')
    const batch = [commit(A, 'r1', 'r2', [c1, up]), commit(A, 'r2', 'r3', [c2])]
    expect(absent(batch, [[A, 'r1']])).toEqual([c1, c2])
  })

  it('takes nothing of a repo never indexed, nor of one whose chain breaks in the batch', () => {
    const never = op('create', 'p1')
    const before = op('create', 'p2')
    const after = op('create', 'p3')
    const batch = [
      commit(B, 'q0', 'r1', [never]),
      commit(A, 'r1', 'r2', [before]),
      commit(A, 'rX', 'r3', [after]),
    ]
    expect(absent(batch, [[A, 'r1']])).toEqual([])
  })

  it("takes a repo's first commit (no since) where the index holds nothing of the repo", () => {
    const first = op('create', 'p1')
    const next = op('create', 'p2')
    const batch = [commit(B, null, 'q1', [first]), commit(B, 'q1', 'q2', [next])]
    expect(absent(batch, [])).toEqual([first, next])
    // Indexed already: a first commit again is a reset, which breaks the chain. Twice in the
    // batch: the second breaks it, and nothing of the repo is taken.
    expect(absent([commit(A, null, 'r9', [op('create', 'p3')])], [[A, 'r1']])).toEqual([])
    const twice = [
      commit(B, null, 'q1', [op('create', 'p4')]),
      commit(B, null, 'q2', [op('create', 'p5')]),
    ]
    expect(absent(twice, [])).toEqual([])
  })

  it('takes nothing of a repo whose last fetch failed, or that an account deletion touches', () => {
    const failed = op('create', 'p1')
    const gone = op('create', 'p2')
    const batch: IngestEvent[] = [
      commit(A, 'r1', 'r2', [failed]),
      { type: 'account', seq: ++seq, time: TIME, did: B, active: false, status: 'deleted' },
      commit(B, 'q1', 'q2', [gone]),
    ]
    expect(
      absent(
        batch,
        [
          [A, 'r1'],
          [B, 'q1'],
        ],
        [A],
      ),
    ).toEqual([])
  })

  it('takes a URI only where the batch touches it first: a delete before a create leaves it', () => {
    const del = op('delete', 'p1')
    const again = op('create', 'p1')
    const other = op('create', 'p2')
    const batch = [commit(A, 'r1', 'r2', [del]), commit(A, 'r2', 'r3', [again, other])]
    expect(absent(batch, [[A, 'r1']])).toEqual([other])
  })
})

import type { IngestEvent, RepoChunk } from '@openplane/ingest'
import { describe, expect, it } from 'vitest'
import { Committer, type RepoWrites } from './committer.ts'

const chunk = (did: string, ops: number): RepoChunk => ({
  did,
  events: [
    {
      type: 'commit',
      seq: 1,
      time: '2026-01-01T00:00:00.000Z',
      did,
      commit: 'bafy',
      rev: '3k',
      ops: Array.from({ length: ops }, (_, i) => ({
        action: 'create',
        path: `app.bsky.feed.like/${i}`,
        cid: 'bafy',
        record: {},
      })),
    } as unknown as IngestEvent,
  ],
})

/** Records each transaction's repos and what it was told comes next; each write waits a turn. */
function recording() {
  const writes: { repos: string[]; next: string[] | undefined }[] = []
  const writer: RepoWrites = {
    async applyRepos(parts, _mark, next) {
      await new Promise((r) => setTimeout(r, 5))
      // Asked once the transaction is planned, as the writer does.
      const following = next?.().map((p) => p.did)
      writes.push({ repos: parts.map((p) => p.did), next: following })
      await new Promise((r) => setTimeout(r, 5))
    },
  }
  return { writer, writes }
}

describe('Committer', () => {
  it('writes next exactly the group it named while writing the one before', async () => {
    const { writer, writes } = recording()
    const committer = new Committer(writer, 10)
    const pending = [committer.write(chunk('a', 4))]
    // Queued while `a` is written: b and c fit one transaction (8 ops), d another.
    await new Promise((r) => setTimeout(r, 1))
    for (const [did, ops] of [
      ['b', 4],
      ['c', 4],
      ['d', 6],
    ] as const) {
      pending.push(committer.write(chunk(did, ops)))
    }
    await Promise.all(pending)
    expect(writes.map((w) => w.repos)).toEqual([['a'], ['b', 'c'], ['d']])
    for (let i = 0; i + 1 < writes.length; i++) {
      expect(writes[i]!.next).toEqual(writes[i + 1]!.repos)
    }
    expect(writes.at(-1)!.next).toEqual([])
  })

  it('keeps the named group when more is queued after it was named', async () => {
    const { writer, writes } = recording()
    const committer = new Committer(writer, 10)
    const pending = [committer.write(chunk('a', 4)), committer.write(chunk('b', 4))]
    // `b` is named while `a` is written; `c` arrives after that and would have fit with `b`.
    await new Promise((r) => setTimeout(r, 7))
    pending.push(committer.write(chunk('c', 2)))
    await Promise.all(pending)
    expect(writes.map((w) => w.repos)).toEqual([['a'], ['b'], ['c']])
    expect(writes[0]!.next).toEqual(['b'])
  })
})

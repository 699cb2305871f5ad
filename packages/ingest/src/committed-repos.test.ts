import { describe, expect, it } from 'vitest'
import { CommittedRepos } from './committed-repos.ts'

const alice = 'did:plc:alice'
const bob = 'did:plc:bob'
const actor = (handle: string | null) => ({ handle, indexedAt: '2026-01-01T00:00:00.000Z' })

describe('CommittedRepos', () => {
  it('keeps the actors and revs a committed part wrote', () => {
    const repos = new CommittedRepos()
    repos.apply([{ rows: [], actors: [[alice, actor('alice.test')]], revs: [[alice, 'r1']] }])
    expect(repos.actor(alice)).toEqual(actor('alice.test'))
    expect(repos.sync(alice)).toEqual({ rev: 'r1' })
    expect(repos.actor(bob)).toBeUndefined()
    expect(repos.sync(bob)).toBeUndefined()
    // A later part changes only what it names.
    repos.apply([{ rows: [], revs: [[alice, null]] }])
    expect(repos.sync(alice)).toEqual({ rev: null })
    expect(repos.actor(alice)).toEqual(actor('alice.test'))
    // A deleted actor row is known absent.
    repos.apply([{ rows: [], actors: [[alice, null]] }])
    expect(repos.actor(alice)).toBeNull()
  })

  it('forgets a repo whose account was deleted outside a plan', () => {
    const repos = new CommittedRepos()
    repos.apply([{ rows: [], actors: [[alice, actor('a.test')]], revs: [[alice, 'r1']] }])
    repos.apply([{ account: alice }, { rows: [], revs: [[bob, 'r2']] }])
    expect(repos.actor(alice)).toBeUndefined()
    expect(repos.sync(alice)).toBeUndefined()
    expect(repos.sync(bob)).toEqual({ rev: 'r2' })
  })

  it('keeps what was read, absent rows too, unless a batch committed meanwhile', () => {
    const repos = new CommittedRepos()
    const version = repos.version
    repos.learn(version, {
      actors: { dids: [alice, bob], rows: new Map([[alice, actor('a.test')]]) },
      syncs: { dids: [alice, bob], rows: new Map([[bob, 'r9']]) },
    })
    expect(repos.actor(alice)).toEqual(actor('a.test'))
    expect(repos.actor(bob)).toBeNull()
    expect(repos.sync(alice)).toBeNull()
    expect(repos.sync(bob)).toEqual({ rev: 'r9' })

    const stale = new CommittedRepos()
    const before = stale.version
    stale.apply([{ rows: [], revs: [[alice, 'r2']] }])
    stale.learn(before, { syncs: { dids: [alice], rows: new Map([[alice, 'r1']]) } })
    expect(stale.sync(alice)).toEqual({ rev: 'r2' })
  })

  it('drops the repo changed longest ago past its bound, and keeps nothing at 0', () => {
    const repos = new CommittedRepos(2)
    repos.apply([{ rows: [], revs: [[alice, 'r1']] }])
    repos.apply([{ rows: [], revs: [[bob, 'r1']] }])
    repos.apply([{ rows: [], revs: [[alice, 'r2']] }])
    repos.apply([{ rows: [], revs: [['did:plc:carol', 'r1']] }])
    expect(repos.size).toBe(2)
    expect(repos.sync(bob)).toBeUndefined()
    expect(repos.sync(alice)).toEqual({ rev: 'r2' })

    const none = new CommittedRepos(0)
    none.apply([{ rows: [], revs: [[alice, 'r1']] }])
    none.learn(none.version, { syncs: { dids: [alice], rows: new Map() } })
    expect(none.size).toBe(0)
  })
})

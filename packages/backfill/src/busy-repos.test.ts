import { describe, expect, it } from 'vitest'
import { BusyRepos } from './busy-repos.ts'

describe('busy repos', () => {
  it('counts a repo let go while the queue was read as taken for that read', async () => {
    const busy = new BusyRepos()
    busy.add('did:a')
    busy.add('did:b')
    const { found, busy: taken } = await busy.whileReading(async () => {
      // A job finishes during the read: its row may still read as pending.
      busy.release('did:a')
      return ['did:a', 'did:c']
    })
    expect(found.filter((did) => !taken(did))).toEqual(['did:c'])
    expect(taken('did:b')).toBe(true)
    // The next read sees it let go.
    expect(busy.has('did:a')).toBe(false)
    const next = await busy.whileReading(async () => ['did:a'])
    expect(next.busy('did:a')).toBe(false)
  })

  it('passes the taken repos to the read, and keeps none once it is done', async () => {
    const busy = new BusyRepos()
    busy.add('did:a')
    await busy.whileReading(async (taken) => {
      expect(taken.size).toBe(1)
      expect(taken.has('did:a')).toBe(true)
    })
    busy.release('did:a')
    expect(busy.size).toBe(0)
  })
})

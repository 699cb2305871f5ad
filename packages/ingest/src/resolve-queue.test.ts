import { describe, expect, it } from 'vitest'
import { ResolveQueue, type PrefetchOutcome } from './resolve-queue.ts'

/** A resolver whose lookups finish when the test says, and the outcomes the queue reported. */
function setup(opts: { concurrency?: number; maxQueued?: number }) {
  const started: string[] = []
  const finish = new Map<string, (ok: boolean) => void>()
  const outcomes: PrefetchOutcome[] = []
  const queue = new ResolveQueue(
    (did) => {
      started.push(did)
      if (did === 'throws') throw new Error('not a promise')
      return new Promise((resolve, reject) =>
        finish.set(did, (ok) => (ok ? resolve('h') : reject(new Error('down')))),
      )
    },
    (o) => outcomes.push(o),
    opts,
  )
  const settle = () => new Promise((r) => setImmediate(r))
  return { queue, started, finish, outcomes, settle }
}

describe('resolve queue', () => {
  it('runs at most `concurrency` lookups, starting the next as one finishes', async () => {
    const { queue, started, finish, outcomes, settle } = setup({ concurrency: 2 })
    queue.warm(['a', 'b', 'c', 'd'])
    expect(started).toEqual(['a', 'b'])
    finish.get('a')!(true)
    await settle()
    expect(started).toEqual(['a', 'b', 'c'])
    finish.get('b')!(false)
    await settle()
    expect(started).toEqual(['a', 'b', 'c', 'd'])
    expect(outcomes).toEqual(['resolved', 'failed'])
  })

  it('drops what is past `maxQueued` waiting, and counts it', () => {
    const { queue, started, outcomes } = setup({ concurrency: 1, maxQueued: 2 })
    queue.warm(['a', 'b', 'c', 'd', 'e'])
    // 'a' runs; 'b' and 'c' wait; 'd' and 'e' find the queue full.
    expect(started).toEqual(['a'])
    expect(outcomes).toEqual(['dropped', 'dropped'])
  })

  it('forgets what it has not started when cleared, and goes on with what comes after', async () => {
    const { queue, started, finish, settle } = setup({ concurrency: 1 })
    queue.warm(['a', 'b', 'c'])
    queue.clearWarming()
    queue.warm(['d'])
    finish.get('a')!(true)
    await settle()
    expect(started).toEqual(['a', 'd'])
  })

  it('counts a resolver that throws as a failed lookup', async () => {
    const { queue, outcomes, settle } = setup({ concurrency: 1 })
    queue.warm(['throws'])
    await settle()
    expect(outcomes).toEqual(['failed'])
  })

  it('keeps only what waits, however long it is never empty', async () => {
    const { queue, finish, settle } = setup({ concurrency: 1, maxQueued: 100_000 })
    let next = 1
    queue.warm(['d0', 'd1'])
    // Each lookup that finishes lets the next start while one more arrives: never empty.
    for (let i = 0; i < 5000; i++) {
      queue.warm([`d${++next}`])
      finish.get(`d${i}`)!(true)
      await settle()
    }
    expect(queue.held.waiting).toBe(1)
    expect(queue.held.array).toBeLessThan(2100)
  })
})

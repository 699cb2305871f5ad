import { describe, expect, it } from 'vitest'
import { MemoryTimelineStore } from '@openplane/timelines'
import { did, post, timelineStoreBehaviour } from './behaviour.ts'

describe('MemoryTimelineStore', () => {
  timelineStoreBehaviour(() => ({ make: async (opts) => new MemoryTimelineStore(opts) }))

  it('keeps at most maxReaders timelines, dropping the least recently active', async () => {
    const store = new MemoryTimelineStore({ maxReaders: 3 })
    const readers = ['a', 'b', 'c', 'd'].map(did)
    for (const [i, r] of readers.entries()) {
      await store.materialise('timeline', r, [post(did('x'), new Date(i).toISOString())], {
        complete: true,
      })
    }
    const kept = await Promise.all(readers.map((r) => store.isMaterialised(r)))
    expect(kept).toEqual([false, true, true, true])
    await store.touch(readers[1]!) // b is now the most recent
    await store.startRebuild('timeline', did('e'))
    expect(await Promise.all(readers.map((r) => store.isMaterialised(r)))).toEqual([
      false,
      true,
      false,
      true,
    ])
  })
})

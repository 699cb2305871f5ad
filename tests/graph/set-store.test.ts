// SetStore against a plain Map<id, Set> model: small sets packed in the arena, large ones live,
// through flushes, garbage compaction and snapshot-style records.
import { SetStore } from '@openplane/graph'
import { describe, expect, it } from 'vitest'
import { random } from './fixture.ts'

function check(store: SetStore, model: Map<number, Set<number>>, ids: number) {
  for (let id = 0; id < ids; id++) {
    const want = [...(model.get(id) ?? [])].sort((a, b) => a - b)
    expect(store.count(id)).toBe(want.length)
    expect(store.use(id, (set) => (set ? [...set] : []))).toEqual(want)
    expect([...(store.get(id) ?? [])]).toEqual(want)
  }
}

describe('SetStore', () => {
  it('holds the same sets as a model through edits, flushes and compactions', () => {
    const rand = random(11)
    // Small segments, so garbage soon calls for compactions.
    const store = new SetStore({ segmentBytes: 64 * 1024 })
    const model = new Map<number, Set<number>>()
    const IDS = 3000
    let compacted = false
    for (let round = 0; round < 30; round++) {
      for (let op = 0; op < 2000; op++) {
        // A few ids grow large (live), most stay small (arena).
        const id = rand() < 0.1 ? Math.floor(rand() * 5) : Math.floor(rand() * IDS)
        const member = Math.floor(rand() * 200_000)
        const set = model.get(id) ?? new Set<number>()
        model.set(id, set)
        if (rand() < 0.7) {
          expect(store.add(id, member)).toBe(!set.has(member))
          set.add(member)
        } else {
          const first = set.values().next()
          const victim = !first.done && rand() < 0.8 ? first.value : member
          expect(store.delete(id, victim)).toBe(set.has(victim))
          set.delete(victim)
        }
        expect(store.has(id, member)).toBe(set.has(member))
      }
      const before = store.stats().garbage
      store.flush()
      if (store.stats().garbage < before) compacted = true
      if (round % 10 === 9) check(store, model, IDS)
    }
    expect(compacted).toBe(true)
    const stats = store.stats()
    expect(stats.liveSets).toBeGreaterThan(0)
    expect(stats.liveSets).toBeLessThan(20)

    // Records restore into an equal store.
    const copy = new SetStore()
    for (const record of store.records()) {
      const data = Buffer.alloc(record.byteLength)
      record.write(data)
      copy.put(record.id, record.count, data)
    }
    check(copy, model, IDS)
    expect(() => copy.put(1, 1, Buffer.alloc(8))).toThrow('stored twice')
  })

  it('folds small changed sets back into the arena on its own', () => {
    const store = new SetStore()
    for (let id = 0; id < 20_000; id++) store.add(id, id + 1)
    expect(store.stats().liveSets).toBeLessThanOrEqual(8193)
    for (let id = 0; id < 20_000; id++) expect(store.has(id, id + 1)).toBe(true)
  })
})

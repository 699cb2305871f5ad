// DID interning: ids persist across instances and connections, concurrent interners agree, and
// re-interning known DIDs does not burn sequence values.
import { ActorIds } from '@openplane/graph'
import { sql } from 'kysely'
import { afterAll, describe, expect, it } from 'vitest'
import { didOf, random, schemas } from './fixture.ts'

const pg = schemas()
afterAll(() => pg.dropAll())

const shuffled = <T>(list: readonly T[], rand: () => number): T[] => {
  const out = [...list]
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1))
    ;[out[i], out[j]] = [out[j] as T, out[i] as T]
  }
  return out
}

describe('ActorIds', () => {
  it('gives a DID the same id in every instance and connection', async () => {
    const { db, connect } = await pg.create()
    const first = new ActorIds(db)
    const [a, b, c] = await first.intern([didOf(1), didOf(2), didOf(3)])
    expect(new Set([a, b, c]).size).toBe(3)
    expect(await first.intern([didOf(2), didOf(2)])).toEqual([b, b])
    expect(first.did(b as number)).toBe(didOf(2))

    const other = new ActorIds(connect())
    expect(other.id(didOf(1))).toBeUndefined()
    const [c2, d, a2] = await other.intern([didOf(3), didOf(4), didOf(1)])
    expect([c2, a2]).toEqual([c, a])
    expect([a, b, c]).not.toContain(d)

    // Known DIDs are read back, not re-inserted: the sequence moved once per DID.
    const loaded = new ActorIds(connect())
    await loaded.load()
    expect(loaded.size).toBe(4)
    expect(loaded.id(didOf(4))).toBe(d)
    expect(loaded.highWater).toBe(4)
    await loaded.intern([didOf(1), didOf(2), didOf(3), didOf(4), didOf(5)])
    expect(loaded.id(didOf(5))).toBe(5)

    const upTo = new ActorIds(db)
    await upTo.load({ upTo: 2 })
    expect(upTo.size).toBe(2)
  })

  it('gives one id per DID to concurrent interners on two connections', async () => {
    const { connect } = await pg.create()
    const rand = random(7)
    const dids = Array.from({ length: 6000 }, (_, i) => didOf(i))
    const left = new ActorIds(connect())
    const right = new ActorIds(connect())
    // Overlapping, differently ordered batches racing each other, several rounds.
    for (let round = 0; round < 3; round++) {
      const part = dids.slice(round * 2000, round * 2000 + 3000)
      const [l, r] = await Promise.all([
        left.intern(shuffled(part, rand)),
        right.intern(shuffled(part, rand)),
      ])
      expect(l).toHaveLength(part.length)
      expect(r).toHaveLength(part.length)
    }
    await Promise.all([left.intern(dids), right.intern(shuffled(dids, rand))])
    for (const did of dids) expect(left.id(did)).toBe(right.id(did))

    const db = connect()
    const { rows } = await sql<{ dids: number; ids: number }>`
      SELECT count(DISTINCT did)::int AS dids, count(DISTINCT id)::int AS ids,
        count(*)::int AS total FROM openplane_actor_id
    `.execute(db.db)
    expect(rows[0]).toEqual({ dids: 6000, ids: 6000, total: 6000 })
    const fresh = new ActorIds(db)
    await fresh.load()
    for (const did of dids) expect(fresh.id(did)).toBe(left.id(did))
  })
})

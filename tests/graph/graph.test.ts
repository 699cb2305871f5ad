// The in-memory graph against the stock `follow` table: edits, counts, GetFollowsFollowing equal to
// the stock's own query, and a load from Postgres equal to the same graph built edge by edge.
import { Graph, RoaringBitmap32 } from '@openplane/graph'
import { afterAll, describe, expect, it } from 'vitest'
import {
  deleteFollows,
  didOf,
  insertFollows,
  random,
  randomFollows,
  schemas,
  stockFollowsFollowing,
} from './fixture.ts'

const pg = schemas()
afterAll(() => pg.dropAll())

const ACTORS = 200
const MISSING = 'did:plc:notinthegraphatallxxxxx'

/** Both directions of every actor, as sorted DIDs: two equal graphs give equal adjacency. */
function adjacency(graph: Graph, dids: readonly string[]) {
  return dids.map((did) => ({
    did,
    following: graph.didsOf(graph.following(did)).sort(),
    followers: graph.didsOf(graph.followers(did)).sort(),
  }))
}

/** `count` random follows among ACTORS, in Postgres and loaded into a graph from there. */
async function loadedRandomGraph(seed: number, count: number) {
  const { db } = await pg.create()
  const rand = random(seed)
  const pairs = randomFollows(ACTORS, count, rand)
  await insertFollows(db, pairs)
  const { graph } = await Graph.loadFromPostgres(db)
  return { db, graph, pairs, rand }
}

describe('Graph', () => {
  it('adds and removes follows, with counts in both directions', async () => {
    const { db } = await pg.create()
    const graph = Graph.create(db)
    const [alice, bob, carol] = [didOf(1), didOf(2), didOf(3)]

    expect(await graph.addFollow(alice, bob)).toBe(true)
    expect(await graph.addFollow(alice, bob)).toBe(false)
    expect(
      await graph.addFollows([
        [alice, carol],
        [bob, carol],
        [carol, alice],
        [alice, bob],
      ]),
    ).toBe(3)
    expect(graph.edgeCount).toBe(4)
    expect(graph.isFollowing(alice, bob)).toBe(true)
    expect(graph.isFollowing(bob, alice)).toBe(false)
    expect(graph.followingCount(alice)).toBe(2)
    expect(graph.followerCount(carol)).toBe(2)
    expect(graph.didsOf(graph.followers(carol)).sort()).toEqual([alice, bob])
    const carolId = graph.ids.id(carol) as number
    expect(graph.followerCount(carolId)).toBe(2)
    expect(graph.followingCount(MISSING)).toBe(0)
    expect(graph.followers(MISSING).isEmpty).toBe(true)

    expect(graph.removeFollow(alice, carol)).toBe(true)
    expect(graph.removeFollow(alice, carol)).toBe(false)
    expect(graph.removeFollow(MISSING, carol)).toBe(false)
    expect(graph.followerCount(carol)).toBe(1)
    expect(graph.isFollowing(alice, carol)).toBe(false)
    expect(graph.removeFollow(bob, carol)).toBe(true)
    expect(graph.followers(carol).isEmpty).toBe(true)
    expect(graph.edgeCount).toBe(2)
    // By id, synchronously, once interned.
    expect(graph.addFollowIds(carolId, graph.ids.id(bob) as number)).toBe(true)
    expect(graph.isFollowing(carol, bob)).toBe(true)
  })

  it('answers GetFollowsFollowing as the stock query does, on a random graph', async () => {
    const { db, graph, rand } = await loadedRandomGraph(42, 5000)
    expect(graph.edgeCount).toBe(5000)

    const viewers = [
      ...Array.from({ length: 20 }, () => didOf(Math.floor(rand() * ACTORS))),
      MISSING,
    ]
    const targets = Array.from({ length: 25 }, () => didOf(Math.floor(rand() * ACTORS)))
    targets.push(MISSING, targets[0] as string, viewers[0] as string)
    let nonEmpty = 0
    for (const viewer of viewers) {
      const results = graph.followsFollowing(viewer, targets)
      expect(results.map((r) => r.targetDid)).toEqual(targets)
      for (const { targetDid, dids } of results) {
        const stock = await stockFollowsFollowing(db, viewer, targetDid)
        expect([...dids].sort()).toEqual(stock.sort())
        // Our defined order: ascending actor id.
        const ids = dids.map((did) => graph.ids.id(did) as number)
        expect(ids).toEqual([...ids].sort((a, b) => a - b))
        if (dids.length > 0) nonEmpty++
      }
    }
    expect(nonEmpty).toBeGreaterThan(100)
    expect(graph.followsFollowing(viewers[0] as string, [])).toEqual([])
  })

  it('intersects a set with what the viewer follows', async () => {
    const { db } = await pg.create()
    const graph = Graph.create(db)
    const viewer = didOf(0)
    await graph.addFollows([1, 2, 3, 4].map((i) => [viewer, didOf(i)] as const))
    await graph.addFollows([
      [didOf(9), didOf(5)],
      [didOf(9), didOf(3)],
    ])
    const celebrities = [didOf(2), didOf(4), didOf(5), MISSING]
    const mine = graph.intersectFollowing(viewer, celebrities)
    expect(graph.didsOf(mine).sort()).toEqual([didOf(2), didOf(4)])
    const asIds = graph.intersectFollowing(viewer, graph.following(didOf(9)))
    expect(graph.didsOf(asIds)).toEqual([didOf(3)])
    expect(graph.intersectFollowing(MISSING, celebrities).isEmpty).toBe(true)
  })

  it('names the members of a set the viewer follows, call after call, as plain sets do', async () => {
    // Loaded: small sets packed in the arena; then changed: some live again.
    const { graph, pairs, rand } = await loadedRandomGraph(7, 6000)
    const extra = randomFollows(ACTORS, 300, rand)
    await graph.addFollows(extra)
    const following = new Map<string, Set<string>>()
    for (const [a, b] of [...pairs, ...extra]) {
      following.set(a, (following.get(a) ?? new Set()).add(b))
    }
    for (let round = 0; round < 60; round++) {
      const members = Array.from({ length: 1 + Math.floor(rand() * 80) }, () =>
        didOf(Math.floor(rand() * ACTORS)),
      )
      const set = graph.following(didOf(Math.floor(rand() * ACTORS)))
      const named = round % 2 ? graph.didsOf(set) : members
      const ids = members.map((did) => graph.ids.id(did)).filter((id) => id !== undefined)
      const bitmap = round % 2 ? set : new RoaringBitmap32(ids)
      const viewer = didOf(Math.floor(rand() * ACTORS))
      const mine = following.get(viewer) ?? new Set()
      const expected = [...new Set(named)].filter((did) => mine.has(did))
      const got = graph.followingDidsIn(viewer, bitmap)
      expect([...got].sort()).toEqual(expected.sort())
      const order = got.map((did) => graph.ids.id(did) as number)
      expect(order).toEqual([...order].sort((x, y) => x - y))
    }
    expect(graph.followingDidsIn(MISSING, graph.following(didOf(1)))).toEqual([])
  })

  it("keeps a viewer's answer for a set's version only while the viewer's follows hold", async () => {
    const { graph, rand } = await loadedRandomGraph(11, 6000)
    const viewers = Array.from({ length: 12 }, (_, i) => didOf(i * 7))
    let set = new RoaringBitmap32()
    let version = 0
    let kept = 0
    const previous = new Map<string, readonly string[]>()
    for (let step = 0; step < 1500; step++) {
      const r = rand()
      const viewer = viewers[Math.floor(rand() * viewers.length)]!
      const other = didOf(Math.floor(rand() * ACTORS))
      if (r < 0.05) await graph.addFollow(viewer, other)
      else if (r < 0.1) {
        const follows = graph.didsOf(graph.following(viewer))
        if (follows.length)
          graph.removeFollow(viewer, follows[Math.floor(rand() * follows.length)]!)
      } else if (r < 0.12) {
        // The set changes, and its version with it.
        const id = graph.ids.id(other)
        if (id !== undefined && rand() < 0.5) set.add(id)
        else if (id !== undefined) set.remove(id)
        version++
      } else if (r < 0.13) {
        // Another set object, at the same version number, is another set.
        set = new RoaringBitmap32(set)
        const id = graph.ids.id(other)
        if (id !== undefined) set.add(id)
      }
      const got = graph.followingDidsIn(viewer, set, version)
      expect(got).toEqual(graph.followingDidsIn(viewer, set))
      if (previous.get(viewer) === got) kept++
      previous.set(viewer, got)
      expect(Object.isFrozen(got)).toBe(true)
    }
    // Most reads come between changes of their viewer's follows and of the set.
    expect(kept).toBeGreaterThan(500)
    // A graph reloaded in place: no answer kept from the edges it had.
    const targets = viewers.map((_, i) => didOf(i * 7 + 1))
    for (const did of targets) set.add(graph.ids.id(did) as number)
    version++
    const before = viewers.map((v) => graph.followingDidsIn(v, set, version))
    const reloaded = new Graph(graph.ids)
    await reloaded.addFollows(viewers.map((v, i) => [v, targets[i]!] as const))
    graph.replaceWith(reloaded)
    const after = viewers.map((v) => graph.followingDidsIn(v, set, version))
    expect(after).toEqual(targets.map((did) => [did]))
    expect(after).not.toEqual(before)
  })

  it('loads from Postgres exactly what an incremental build holds', async () => {
    const { db, connect } = await pg.create()
    const rand = random(1)
    const pairs = randomFollows(ACTORS, 4000, rand)
    const removed = pairs.filter(() => rand() < 0.2)

    // Edge by edge, in random batches, with removals, interning as it goes.
    const incremental = Graph.create(db)
    for (let i = 0; i < pairs.length; i += 333) {
      await incremental.addFollows(pairs.slice(i, i + 333))
    }
    for (const [a, b] of removed) expect(incremental.removeFollow(a, b)).toBe(true)
    incremental.compact()

    await insertFollows(db, pairs)
    await deleteFollows(db, removed)
    await connect()
      .db.insertInto('openplane_cursor')
      .values({ source: 'wss://relay.test', seq: 77 })
      .execute()
    // Another "process", small pages: the mapping is shared, so ids are equal too.
    const { graph: loaded, cursors } = await Graph.loadFromPostgres(connect(), { pageSize: 97 })
    expect(cursors).toEqual(new Map([['wss://relay.test', 77]]))
    expect(loaded.edgeCount).toBe(pairs.length - removed.length)
    expect(loaded.edgeCount).toBe(incremental.edgeCount)
    const dids = Array.from({ length: ACTORS }, (_, i) => didOf(i))
    expect(adjacency(loaded, dids)).toEqual(adjacency(incremental, dids))
    for (const did of dids) {
      expect(loaded.ids.id(did)).toBe(incremental.ids.id(did))
      expect([...loaded.following(did)]).toEqual([...incremental.following(did)])
    }
    expect(loaded.serializedSizeInBytes()).toBe(incremental.serializedSizeInBytes())

    // An empty follow table loads an empty graph.
    const { db: empty } = await pg.create()
    expect((await Graph.loadFromPostgres(empty)).graph.edgeCount).toBe(0)
  })
})

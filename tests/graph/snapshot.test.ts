// Snapshots: serialized bitmaps in chunk rows, restored equal, with the caller's cursor.
import { Graph } from '@openplane/graph'
import { sql } from 'kysely'
import { afterAll, describe, expect, it } from 'vitest'
import { didOf, insertFollows, random, randomFollows, schemas } from './fixture.ts'

const pg = schemas()
afterAll(() => pg.dropAll())

describe('graph snapshots', () => {
  it('round-trips through Postgres, chunked, replacing the previous snapshot', async () => {
    const { db, connect } = await pg.create()
    expect(await Graph.loadSnapshot(db)).toBeUndefined()

    const rand = random(3)
    // A hub followed by every other actor (no runs to compress), larger than a chunk below.
    const pairs = randomFollows(300, 5000, rand).filter(([, b]) => b !== didOf(0))
    for (let i = 1; i < 300; i += 2) pairs.push([didOf(i), didOf(0)])
    await insertFollows(db, pairs)
    const { graph } = await Graph.loadFromPostgres(db)

    const first = await graph.snapshot(db, 100)
    expect(first.chunkCount).toBe(1)
    expect(graph.removeFollow(didOf(1), didOf(0))).toBe(true)
    await graph.addFollow(didOf(1), 'did:plc:newcomer')
    const meta = await graph.snapshot(db, 2 ** 40, { chunkBytes: 64 })
    expect(meta).toMatchObject({ cursor: 2 ** 40, edgeCount: graph.edgeCount })
    expect(meta.chunkCount).toBeGreaterThan(10)
    expect(meta.bytes).toBeGreaterThan(graph.serializedSizeInBytes())
    expect(meta.actorIdHighWater).toBe(graph.ids.highWater)

    const { rows } = await sql<{ snapshots: number; chunks: number; biggest: number }>`
      SELECT (SELECT count(*)::int FROM openplane_graph_snapshot) AS snapshots,
        (SELECT count(*)::int FROM openplane_graph_snapshot_chunk) AS chunks,
        (SELECT max(length(data))::int FROM openplane_graph_snapshot_chunk) AS biggest
    `.execute(db.db)
    expect(rows[0]).toMatchObject({ snapshots: 1, chunks: meta.chunkCount })
    expect(rows[0]?.biggest).toBeGreaterThan(64)

    // Another process restores it: same edges, same ids, same cursor.
    const restored = await Graph.loadSnapshot(connect())
    if (!restored) throw new Error('no snapshot')
    expect(restored.snapshot).toEqual(meta)
    const copy = restored.graph
    expect(copy.edgeCount).toBe(graph.edgeCount)
    const dids = [...Array.from({ length: 300 }, (_, i) => didOf(i)), 'did:plc:newcomer']
    for (const did of dids) {
      expect(copy.ids.id(did)).toBe(graph.ids.id(did))
      expect([...copy.following(did)]).toEqual([...graph.following(did)])
      expect([...copy.followers(did)]).toEqual([...graph.followers(did)])
    }
    expect(copy.followerCount(didOf(0))).toBe(149)
    expect(copy.followsFollowing(didOf(2), [didOf(0)])).toEqual(
      graph.followsFollowing(didOf(2), [didOf(0)]),
    )
    // The restored graph keeps working: new DIDs intern past the high-water mark.
    await copy.addFollow('did:plc:later', didOf(0))
    expect(copy.ids.id('did:plc:later')).toBeGreaterThan(meta.actorIdHighWater)
  })

  it('restores an empty graph', async () => {
    const { db } = await pg.create()
    const graph = Graph.create(db)
    const meta = await graph.snapshot(db, 5)
    expect(meta).toMatchObject({ chunkCount: 0, bytes: 0, edgeCount: 0, cursor: 5 })
    const restored = await Graph.loadSnapshot(db)
    expect(restored?.graph.edgeCount).toBe(0)
    expect(restored?.snapshot.cursor).toBe(5)
  })
})

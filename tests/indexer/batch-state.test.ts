// The batch state a plan runs against: reads of rows not loaded yet miss (and are noted), one
// load per table and lookup shape brings them in, the batch's own writes are seen by later reads
// through any lookup, changes roll back to a mark, and the net writes per table come out of
// comparing each key's row before and after the batch.
import { createPgDb, migrateToLatest, type Db } from '@openplane/db'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { applyWrites } from '../../packages/ingest/src/batch/apply.ts'
import { CommittedRows } from '../../packages/ingest/src/batch/committed-rows.ts'
import { loadSchemaInfo, type SchemaInfo } from '../../packages/ingest/src/batch/schema.ts'
import { BatchState } from '../../packages/ingest/src/batch/state.ts'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { dropSchemas } from '../harness/stock-network.ts'

const A = 'did:plc:aaaa'
const B = 'did:plc:bbbb'
const post = (n: number) => `at://${B}/app.bsky.feed.post/p${n}`
const like = (n: number) => ({
  uri: `at://${A}/app.bsky.feed.like/l${n}`,
  cid: `bafylike${n}`,
  creator: A,
  subject: post(n % 2),
  subjectCid: 'bafypost',
  via: null,
  viaCid: null,
  createdAt: '2026-01-05T12:00:00.000Z',
  indexedAt: '2026-01-05T12:00:00.000Z',
})

const newPost = (n: number) => ({
  uri: post(n),
  cid: `bafypost${n}`,
  creator: B,
  text: '',
  createdAt: '2026-01-05T12:00:00.000Z',
  indexedAt: '2026-01-05T12:00:00.000Z',
})

/** Runs `pass` until it reads nothing unloaded (as the planner does); returns the passes. */
async function plan(state: BatchState, pass: () => void): Promise<number> {
  for (let passes = 1; ; passes++) {
    const mark = state.mark()
    const misses = state.missCount
    pass()
    if (state.missCount === misses) return passes
    state.rollback(mark)
    await state.load()
  }
}

describe('batch state', () => {
  let db: Db
  let info: SchemaInfo
  const schema = uniqueName('op_bstate')

  beforeAll(async () => {
    db = createPgDb({ url: PG_URL, schema })
    await migrateToLatest(db)
    info = await loadSchemaInfo(db.db)
    await db.db
      .insertInto('like')
      .values([like(1), like(2)])
      .execute()
  })
  afterAll(async () => {
    await db.close()
    await dropSchemas([schema])
  })

  it('misses what is not loaded, then reads rows by key and by other columns', async () => {
    const state = new BatchState(db.db, info)
    expect(state.rows('like', { uri: like(1).uri })).toEqual([])
    expect(state.rows('like', { creator: A, subject: post(1) })).toEqual([])
    expect(state.rows('like', { uri: like(9).uri })).toEqual([])
    expect(state.missCount).toBe(3)
    expect(state.pending).toBe(true)
    await state.load()
    // One query per table and lookup shape, however many keys.
    expect(state.queries).toBe(2)
    expect(state.rows('like', { uri: like(1).uri })).toMatchObject([{ cid: 'bafylike1' }])
    expect(state.rows('like', { uri: like(9).uri })).toEqual([])
    expect(state.rows('like', { creator: A, subject: post(1) }).map((r) => r.uri)).toEqual([
      like(1).uri,
    ])
    expect(state.missCount).toBe(3)
  })

  it('knows the unique keys: an insert into a taken slot is refused, a free one computes sortAt', async () => {
    const state = new BatchState(db.db, info)
    let refused: unknown
    let written: Record<string, unknown> | null = null
    await plan(state, () => {
      refused = state.insertIfFree('like', { ...like(7), subject: post(1) })
      written = state.insertIfFree('like', { ...like(8), subject: post(8) })
    })
    expect(refused).toBeNull()
    expect(written).toMatchObject({ uri: like(8).uri, sortAt: '2026-01-05T12:00:00.000Z' })
  })

  it('reads the slots an insert needs without writing it, so the insert then misses nothing', async () => {
    const state = new BatchState(db.db, info)
    state.readSlots('like', { ...like(9), subject: post(1) })
    // Its primary key and its one other unique key.
    expect(state.missCount).toBe(2)
    await state.load()
    expect(state.writes().size).toBe(0)
    const misses = state.missCount
    expect(state.insertIfFree('like', { ...like(9), subject: post(1) })).toBeNull()
    expect(state.insertIfFree('like', { ...like(9), subject: post(1), creator: B })).toBeTruthy()
    expect(state.missCount).toBe(misses + 1)
  })

  it('rolls changes back to a mark, lookups included', async () => {
    const state = new BatchState(db.db, info)
    let during: string[] = []
    let after: string[] = []
    await plan(state, () => {
      const mark = state.mark()
      state.delete('like', { uri: like(1).uri })
      state.put('like', like(3))
      during = state.rows('like', { creator: A, subject: post(1) }).map((r) => String(r.uri))
      state.rollback(mark)
      after = state.rows('like', { creator: A, subject: post(1) }).map((r) => String(r.uri))
    })
    expect(during).toEqual([like(3).uri])
    expect(after).toEqual([like(1).uri])
    expect(state.writes().size).toBe(0)
  })

  it("sees the batch's own writes through every lookup, and nets them per table", async () => {
    const state = new BatchState(db.db, info)
    let seen: string[] = []
    const passes = await plan(state, () => {
      // Delete like 1, write like 3 (same slot as like 1) and like 5 written and removed again,
      // rewrite like 2 unchanged.
      state.delete('like', { uri: like(1).uri })
      state.put('like', like(3))
      state.put('like', like(5))
      state.delete('like', { uri: like(5).uri })
      // Unknown until loaded: the pass that misses it is undone.
      const two = state.first('like', { uri: like(2).uri })
      if (two) state.put('like', two)
      seen = state.rows('like', { creator: A, subject: post(1) }).map((r) => String(r.uri))
    })
    expect(passes).toBeGreaterThan(1)
    expect(seen).toEqual([like(3).uri])
    const writes = state.writes()
    expect([...writes.keys()]).toEqual(['like'])
    expect(writes.get('like')!.deleted.map((r) => r.uri)).toEqual([like(1).uri])
    expect(writes.get('like')!.inserted.map((r) => r.uri)).toEqual([like(3).uri])
  })

  it('changes columns of matching rows in place', async () => {
    const state = new BatchState(db.db, info)
    await plan(state, () => {
      state.update('like', { creator: A, subject: post(0) }, { viaCid: 'bafyvia' })
    })
    const writes = state.writes().get('like')!
    expect(writes.deleted).toEqual([])
    expect(writes.inserted).toEqual([])
    expect(writes.replaced).toMatchObject([
      [
        { uri: like(2).uri, viaCid: null },
        { uri: like(2).uri, viaCid: 'bafyvia' },
      ],
    ])
  })

  it('applies the net writes with one statement per table and kind', async () => {
    const state = new BatchState(db.db, info)
    await plan(state, () => {
      state.delete('like', { uri: like(1).uri })
      state.put('like', like(3))
      state.put('like', { ...like(4), subject: post(7) })
      state.update('like', { uri: like(2).uri }, { viaCid: 'bafyvia' })
    })
    const statements = await db.db
      .transaction()
      .execute(async (tx) => applyWrites(tx, state.writes(), info))
    // Deletes (like 1), the update (like 2, in place) and the inserts (3, 4): one statement each.
    expect(statements).toBe(3)
    const rows = await db.db.selectFrom('like').select(['uri', 'viaCid', 'sortAt']).execute()
    expect(rows.map((r) => r.uri).sort()).toEqual([like(2).uri, like(3).uri, like(4).uri])
    expect(rows.find((r) => r.uri === like(2).uri)!.viaCid).toBe('bafyvia')
    // The generated column is Postgres' own again.
    expect(rows.every((r) => r.sortAt === '2026-01-05T12:00:00.000Z')).toBe(true)
  })

  it('updates only the columns it changed: a value set meanwhile by someone else stays', async () => {
    const actor = (did: string, handle: string) => ({
      did,
      handle,
      indexedAt: '2026-01-05T12:00:00.000Z',
    })
    await db.db
      .insertInto('actor')
      .values([actor(A, 'a.test'), actor(B, 'b.test')])
      .execute()
    const state = new BatchState(db.db, info)
    await plan(state, () => {
      // The two swap handles (a unique column): each must step aside before the other moves in.
      state.update('actor', { did: A }, { handle: 'b.test', indexedAt: '2026-01-06T00:00:00.000Z' })
      state.update('actor', { did: B }, { handle: 'a.test' })
    })
    // A takedown lands between the batch's read and its write.
    await db.db
      .updateTable('actor')
      .set({ takedownRef: 'BSKY-TAKEDOWN-1' })
      .where('did', '=', A)
      .execute()
    await db.db.transaction().execute(async (tx) => applyWrites(tx, state.writes(), info))
    const rows = await db.db
      .selectFrom('actor')
      .select(['did', 'handle', 'takedownRef', 'indexedAt'])
      .orderBy('did')
      .execute()
    expect(rows).toEqual([
      {
        did: A,
        handle: 'b.test',
        takedownRef: 'BSKY-TAKEDOWN-1',
        indexedAt: '2026-01-06T00:00:00.000Z',
      },
      { did: B, handle: 'a.test', takedownRef: null, indexedAt: '2026-01-05T12:00:00.000Z' },
    ])
  })

  it('loads rows by a unique column other than the key (actor.handle), one probe a value', async () => {
    const C = 'did:plc:cccc'
    await db.db
      .insertInto('actor')
      .values([
        { did: C, handle: 'c.test', indexedAt: '2026-01-05T12:00:00.000Z' },
        { did: 'did:plc:dddd', handle: null, indexedAt: '2026-01-05T12:00:00.000Z' },
      ])
      .execute()
    const state = new BatchState(db.db, info)
    let found: string[][] = []
    const passes = await plan(state, () => {
      found = ['c.test', 'C.TEST', 'nobody.test', 'c.tes'].map((handle) =>
        state.rows('actor', { handle }).map((r) => String(r.did)),
      )
    })
    expect(passes).toBe(2)
    // Exactly the value: no other case, no prefix; an absent handle is known absent after one load.
    expect(found).toEqual([[C], [], [], []])
  })

  it('resets the columns a replacing row leaves out, as a re-insert would', async () => {
    await db.db
      .insertInto('like')
      .values({ ...like(11), subject: post(11), via: 'at://via', viaCid: 'bafyvia' })
      .execute()
    const state = new BatchState(db.db, info)
    await plan(state, () => {
      state.delete('like', { uri: like(11).uri })
      const { via: _via, viaCid: _viaCid, ...plain } = like(11)
      state.put('like', { ...plain, subject: post(11), cid: 'bafynew' })
    })
    expect(state.writes().get('like')!.replaced).toHaveLength(1)
    await db.db.transaction().execute(async (tx) => applyWrites(tx, state.writes(), info))
    const row = await db.db
      .selectFrom('like')
      .select(['cid', 'via', 'viaCid'])
      .where('uri', '=', like(11).uri)
      .executeTakeFirstOrThrow()
    expect(row).toEqual({ cid: 'bafynew', via: null, viaCid: null })
  })

  it('loads a thread above a post in one query, and knows a missing ancestor absent', async () => {
    // p23 replies to p22, which replies to p21, which replies to p20: deleted, never stored.
    const postRow = (n: number, parent: number | null) => ({
      uri: post(n),
      cid: `bafypost${n}`,
      creator: B,
      text: '',
      replyRoot: parent === null ? null : post(20),
      replyParent: parent === null ? null : post(parent),
      createdAt: '2026-01-05T12:00:00.000Z',
      indexedAt: '2026-01-05T12:00:00.000Z',
    })
    await db.db
      .insertInto('post')
      .values([postRow(21, 20), postRow(22, 21), postRow(23, 22)])
      .execute()
    const state = new BatchState(db.db, info)
    const walked: string[] = []
    const passes = await plan(state, () => {
      walked.length = 0
      let at = state.first('post', { uri: post(23) })
      while (at) {
        walked.push(at.uri as string)
        at = at.replyParent ? state.first('post', { uri: at.replyParent as string }) : undefined
      }
    })
    expect(walked).toEqual([post(23), post(22), post(21)])
    // One load: the ancestors came with the post, and the deleted root needed no query of its own.
    expect(passes).toBe(2)
    expect(state.queries).toBe(1)
  })

  it('loads a post read alone without the thread above it', async () => {
    // p21..p23 stored by the test above: p23 replies to p22, which replies to p21.
    const state = new BatchState(db.db, info)
    let got: string | undefined
    await plan(state, () => {
      got = state.alone('post', post(23))?.replyParent as string | undefined
    })
    expect(got).toBe(post(22))
    expect(state.queries).toBe(1)
    // Its parent was not loaded with it: reading it now is a miss.
    const misses = state.missCount
    expect(state.first('post', { uri: post(22) })).toBeUndefined()
    expect(state.missCount).toBe(misses + 1)
  })

  it('takes the rows committed batches left as read: no load, and a kept absence inserts', async () => {
    // p21 is stored (by the thread test above); p30 is not.
    const kept = new CommittedRows(100)
    kept.apply([
      {
        rows: [
          { table: 'post', key: post(21), row: { uri: post(21), cid: 'bafykept' } },
          { table: 'post', key: post(30), row: null },
        ],
      },
    ])
    const state = new BatchState(db.db, info, undefined, undefined, kept)
    // The kept row, not the database's: no miss, no query.
    expect(state.rows('post', { uri: post(21) })).toMatchObject([{ cid: 'bafykept' }])
    expect(state.rows('post', { uri: post(30) })).toEqual([])
    state.put('post', newPost(30))
    expect(state.missCount).toBe(0)
    expect(state.queries).toBe(0)
    expect(
      state
        .writes()
        .get('post')
        ?.inserted.map((r) => r.uri),
    ).toEqual([post(30)])
  })

  it("hands on the kept tables' rows it read and wrote, not those the batch below changed", async () => {
    // p21 replies to p20, never stored; p22 replies to p21.
    const kept = new CommittedRows(100)
    const below = new BatchState(db.db, info, undefined, undefined, kept)
    await plan(below, () => void below.delete('post', { uri: post(22) }))
    const state = new BatchState(db.db, info, below, undefined, kept)
    await plan(state, () => {
      // Read: p21 from the database (its missing parent known absent with it); p22 through the
      // batch below, which deleted it.
      state.rows('post', { uri: post(21) })
      state.rows('post', { uri: post(22) })
      state.put('post', newPost(31))
      // `actor` is not a kept table: its reads are not handed on.
      state.rows('actor', { did: A })
    })
    const { rows } = state.committedRows() as { rows: { key: string; row: unknown }[] }
    expect(rows.map((r) => [r.key, r.row === null]).sort()).toEqual(
      [
        [post(20), true],
        [post(21), false],
        [post(31), false],
      ].sort(),
    )
  })
})

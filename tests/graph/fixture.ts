// Fresh migrated schemas for the graph tests, random follow graphs, and the stock `follow` rows
// that hold them.
import { createPgDb, migrateToLatest, type Db } from '@openplane/db'
import { sql } from 'kysely'
import { PG_URL, uniqueName } from '../harness/env.ts'

export interface Schemas {
  /** A new migrated schema; `connect` opens another pool on it (another "process"). */
  create(): Promise<{ db: Db; connect(): Db }>
  dropAll(): Promise<void>
}

export function schemas(): Schemas {
  const open: Db[] = []
  const names: string[] = []
  const connect = (schema: string) => {
    const db = createPgDb({ url: PG_URL, schema, poolSize: 4 })
    open.push(db)
    return db
  }
  return {
    async create() {
      const schema = uniqueName('op_graph')
      names.push(schema)
      const db = connect(schema)
      await migrateToLatest(db)
      return { db, connect: () => connect(schema) }
    },
    async dropAll() {
      const admin = createPgDb({ url: PG_URL, schema: 'public', poolSize: 1 })
      try {
        for (const name of names)
          await sql`DROP SCHEMA IF EXISTS ${sql.id(name)} CASCADE`.execute(admin.db)
      } finally {
        await Promise.all(open.map((db) => db.close()))
        await admin.close()
      }
    },
  }
}

/** A seeded PRNG: the same graph on every run. */
export { seededRandom as random } from '@openplane/timelines'

/** The stock dataplane's GetFollowsFollowing query for one target, as it builds it. */
export async function stockFollowsFollowing(
  db: Db,
  viewer: string,
  target: string,
): Promise<string[]> {
  const rows = await db.db
    .selectFrom('follow')
    .where('follow.creator', '=', viewer)
    .where(
      'follow.subjectDid',
      'in',
      db.db.selectFrom('follow').where('follow.subjectDid', '=', target).select(['creator']),
    )
    .select(['subjectDid'])
    .execute()
  return rows.map((r) => r.subjectDid)
}

export const didOf = (i: number): string => `did:plc:graph${String(i).padStart(19, '0')}`

/** `count` distinct random (creator, subject) pairs over `actors` DIDs, self-follows included. */
export function randomFollows(
  actors: number,
  count: number,
  rand: () => number,
): [string, string][] {
  const seen = new Set<string>()
  const pairs: [string, string][] = []
  while (pairs.length < count) {
    const a = Math.floor(rand() * actors)
    const b = Math.floor(rand() * actors)
    if (seen.has(`${a} ${b}`)) continue
    seen.add(`${a} ${b}`)
    pairs.push([didOf(a), didOf(b)])
  }
  return pairs
}

/** Writes follow rows with the stock's columns, in multi-row inserts. */
export async function insertFollows(db: Db, pairs: readonly (readonly [string, string])[]) {
  for (let i = 0; i < pairs.length; i += 5000) {
    const page = pairs.slice(i, i + 5000)
    const at = new Date(Date.UTC(2025, 0, 1) + i * 1000).toISOString()
    await db.db
      .insertInto('follow')
      .values(
        page.map(([creator, subjectDid], j) => ({
          uri: `at://${creator}/app.bsky.graph.follow/${(i + j).toString(36)}`,
          cid: `bafyreifollow${i + j}`,
          creator,
          subjectDid,
          createdAt: at,
          indexedAt: at,
        })),
      )
      .execute()
  }
}

/** Removes follow rows by pair. */
export async function deleteFollows(db: Db, pairs: readonly (readonly [string, string])[]) {
  for (const [creator, subjectDid] of pairs) {
    await db.db
      .deleteFrom('follow')
      .where('creator', '=', creator)
      .where('subjectDid', '=', subjectDid)
      .execute()
  }
}

// DIDs interned to u32 ids, persisted in openplane_actor_id. Every process maps a DID to the same
// id: ids come from the table's sequence, the table is append-only, and interning is a plain
// upsert-then-read that concurrent processes can run on the same DIDs.
import type { Db } from '@openplane/db'
import { sql } from 'kysely'

/** DIDs per round trip when interning, and rows per page when loading the mapping. */
const BATCH = 10_000

export class ActorIds {
  readonly db: Db
  readonly #byDid = new Map<string, number>()
  readonly #byId: (string | undefined)[] = []
  #highWater = 0

  constructor(db: Db) {
    this.db = db
  }

  /** DIDs known to this process. */
  get size(): number {
    return this.#byDid.size
  }

  /** The greatest id known to this process (0 when none). */
  get highWater(): number {
    return this.#highWater
  }

  /** The id of a DID this process has seen, without asking Postgres. */
  id(did: string): number | undefined {
    return this.#byDid.get(did)
  }

  did(id: number): string | undefined {
    return this.#byId[id]
  }

  /**
   * Records a mapping another process interned (from the graph's change feed), sparing a round
   * trip. The table is append-only, so a mapping read anywhere is the mapping.
   */
  learn(id: number, did: string): void {
    if (this.#byDid.get(did) === id) return
    const known = this.#byId[id]
    if (known !== undefined && known !== did) {
      throw new Error(`actor id ${id} is ${known}, not ${did}`)
    }
    this.#remember(id, did)
  }

  /** Ids for `dids`, in their order; DIDs new to the table get fresh ids. */
  async intern(dids: readonly string[]): Promise<number[]> {
    const missing = [...new Set(dids.filter((did) => !this.#byDid.has(did)))]
    for (let i = 0; i < missing.length; i += BATCH) {
      await this.#internBatch(missing.slice(i, i + BATCH))
    }
    return dids.map((did) => {
      const id = this.#byDid.get(did)
      if (id === undefined) throw new Error(`interning lost ${did}`)
      return id
    })
  }

  /** Reads the persisted mapping (ids ≤ `upTo` when given) into memory, in pages. */
  async load(opts: { upTo?: number } = {}): Promise<void> {
    const upTo = opts.upTo ?? 2 ** 31 - 1
    let after = 0
    for (;;) {
      const rows = await this.db.db
        .selectFrom('openplane_actor_id')
        .select(['id', 'did'])
        .where('id', '>', after)
        .where('id', '<=', upTo)
        .orderBy('id')
        .limit(BATCH * 5)
        .execute()
      for (const row of rows) this.#remember(row.id, row.did)
      const last = rows.at(-1)
      if (!last || rows.length < BATCH * 5) return
      after = last.id
    }
  }

  async #internBatch(dids: string[]): Promise<void> {
    // Read first: `ON CONFLICT DO NOTHING` still draws a sequence value per conflicting row, and
    // re-interning known DIDs (every fresh process does) must not burn ids.
    await this.#lookup(dids)
    const unknown = dids.filter((did) => !this.#byDid.has(did))
    if (unknown.length === 0) return
    // Sorted in the database's collation, so concurrent interners lock DIDs in the same order and
    // cannot deadlock; a DID another process inserted meanwhile is left to it and read back.
    const { rows } = await sql<{ id: number; did: string }>`
      INSERT INTO openplane_actor_id (did)
      SELECT d FROM unnest(${unknown}::varchar[]) AS t(d) ORDER BY d
      ON CONFLICT (did) DO NOTHING
      RETURNING id, did
    `.execute(this.db.db)
    for (const row of rows) this.#remember(row.id, row.did)
    if (rows.length < unknown.length) {
      await this.#lookup(unknown.filter((did) => !this.#byDid.has(did)))
    }
  }

  async #lookup(dids: string[]): Promise<void> {
    const { rows } = await sql<{ id: number; did: string }>`
      SELECT id, did FROM openplane_actor_id WHERE did = ANY(${dids}::varchar[])
    `.execute(this.db.db)
    for (const row of rows) this.#remember(row.id, row.did)
  }

  #remember(id: number, did: string): void {
    this.#byDid.set(did, id)
    // Filling gaps keeps the array in V8's fast elements (a far write would make it a dictionary).
    while (this.#byId.length < id) this.#byId.push(undefined)
    this.#byId[id] = did
    if (id > this.#highWater) this.#highWater = id
  }
}

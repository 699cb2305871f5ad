// Named prepared statements for a pool's repeated reads. Postgres parses and plans an unnamed
// statement on every call: for the short reads an AppView page makes (a dozen lookups by uri
// or did) that cost more of its CPU than running them (measured: planning 1.9 ms of 4.7 ms a
// page). A named statement is parsed once per connection and, after a few runs, planned once.
//
// Only reads whose text repeats are named: `select`/`with` statements without an IN-list of
// parameters (an IN-list's text changes with its length; bind a list as one array instead,
// `= any($1)`), and at most `max` distinct texts per pool, so a connection holds a bounded set.
// A statement whose cached plan Postgres refuses after a schema change ("cached plan must not
// change result type", 0A000) is run unnamed from then on.
import type { PostgresPool, PostgresPoolClient } from 'kysely'
import type pg from 'pg'

/** Postgres refused a prepared statement's cached plan (its result type changed). */
const FEATURE_NOT_SUPPORTED = '0A000'

export class PreparedStatements {
  readonly #names = new Map<string, string>()
  readonly #refused = new Set<string>()
  // Names are never reused, even for a refused text's slot: each connection remembers the text
  // it prepared under a name.
  #next = 0

  readonly max: number

  constructor(max: number) {
    this.max = max
  }

  /** The statement's name if its text is to be prepared, else undefined (run unnamed). */
  nameFor(text: string): string | undefined {
    const known = this.#names.get(text)
    if (known !== undefined) return known
    if (this.#names.size >= this.max || this.#refused.has(text) || !preparable(text)) return
    const name = `openplane_${++this.#next}`
    this.#names.set(text, name)
    return name
  }

  /** Never name this text again (Postgres refused its plan). */
  refuse(text: string): void {
    this.#names.delete(text)
    this.#refused.add(text)
  }
}

/**
 * Marks a read Postgres must plan for its values on each call (a search, whose best plan depends
 * on how common its words are): never prepared.
 */
export const PLAN_PER_CALL = '/* plan per call */'

/** A read whose text repeats: no IN-list of parameters, whose length would vary. */
export function preparable(text: string): boolean {
  return (
    /^\s*(select|with)\b/i.test(text) && !/\bin \(\$\d/i.test(text) && !text.includes(PLAN_PER_CALL)
  )
}

/** A kysely pool over `pool` whose clients run repeated reads as named statements. */
export function preparingPool(pool: pg.Pool, statements: PreparedStatements): PostgresPool {
  // One wrapper per pg client: kysely keys its connections (and their search_path set-up) by it.
  const wrappers = new WeakMap<pg.PoolClient, PostgresPoolClient>()
  const wrap = (client: pg.PoolClient): PostgresPoolClient => {
    async function run(text: string, values: readonly unknown[]): Promise<pg.QueryResult> {
      const name = statements.nameFor(text)
      if (name === undefined) return client.query(text, [...values])
      try {
        return await client.query({ name, text, values: [...values] })
      } catch (err) {
        if ((err as { code?: string }).code !== FEATURE_NOT_SUPPORTED) throw err
        statements.refuse(text)
        return client.query(text, [...values])
      }
    }
    return {
      query: ((textOrCursor: unknown, values?: readonly unknown[]) =>
        typeof textOrCursor === 'string'
          ? run(textOrCursor, values ?? [])
          : client.query(textOrCursor as pg.Submittable)) as unknown as PostgresPoolClient['query'],
      release: () => client.release(),
    }
  }
  return {
    async connect() {
      const client = await pool.connect()
      let wrapper = wrappers.get(client)
      if (!wrapper) wrappers.set(client, (wrapper = wrap(client)))
      return wrapper
    },
    end: () => pool.end(),
  }
}

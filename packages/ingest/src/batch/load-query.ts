// The statement that loads one lookup shape's missed values for a batch's state (state.ts): one
// statement for any number of values, shaped so that Postgres probes its indexes value by value
// rather than planning a join it cannot estimate.
import { sql, type RawBuilder } from 'kysely'
import { textArray } from '@openplane/db'
import type { TableInfo } from './schema.ts'
import type { Row, Value } from './rows.ts'

/**
 * Rows that point to others a plan walks one by one (a reply to its parent, up a thread): loading
 * such a row by key loads the chain above it too, to this depth, in the same query, so a thread
 * walk costs one pass instead of one per level. A link the query found no row for (a deleted
 * parent) is known absent from then on, so the walk stops there without a pass of its own.
 */
export const CHAINS: Readonly<Record<string, { column: string; depth: number }>> = {
  post: { column: 'replyParent', depth: 6 },
}

/** The column a chain load adds to each row: how far above a requested row it was found. */
export const DEPTH = '__chainDepth'

export interface LoadQuery {
  query: RawBuilder<Row>
  /** The chain loaded above the requested rows, if any. */
  chain: { column: string; depth: number } | undefined
  /** Whether the columns are the primary key, in its order. */
  byPk: boolean
}

/**
 * The rows of `table` whose `columns` hold one of `tuples`. `alone`: a primary-key read that
 * never walks up, loaded without the chain above.
 */
export function loadQuery(
  table: string,
  t: TableInfo,
  columns: readonly string[],
  tuples: readonly Value[][],
  alone: boolean,
): LoadQuery {
  const pk = t.primary
  const arrays = columns.map((_, i) => tuples.map((v) => (v[i] == null ? null : String(v[i]))))
  // (c1, c2) in (select * from unnest($1::text[], $2::text[])): one statement for any count.
  // Compared as text: a relabel for the (var)char columns these lookups use, so their
  // indexes still serve.
  const cols = sql.join(columns.map((c) => sql`${sql.ref(c)}::text`))
  const unnest = sql.join(arrays.map((a) => sql`${textArray(a)}::text[]`))
  const select = sql.join(
    t.columns.map((c) => (t.json.has(c) ? sql`${sql.ref(c)}::text as ${sql.ref(c)}` : sql.ref(c))),
  )
  const chain = alone ? undefined : CHAINS[table]
  const byPk = columns.length === pk.length && pk.every((c, i) => columns[i] === c)
  // A unique column besides the key (actor.handle) is probed one value at a time through
  // its btree, as a range: as an equality, Postgres may take the stock's trigram index on
  // the same column instead, which answers it in milliseconds rather than microseconds, and
  // slower as the table grows (about 2 ms a probe at 100,000 actors, 9.75 ms a call in the
  // soak of bench:faults; as a range, 500 probes in 9 ms).
  const uniqueAlone =
    !byPk && columns.length === 1 && t.unique.some((u) => u.length === 1 && u[0] === columns[0])
  // A lookup by columns that are no unique key (replies by `replyParent`, feed items by
  // `postUri`) is probed value by value through a lateral subquery the planner cannot flatten
  // (`offset 0`). As a semi-join, Postgres, counting on ten values and many rows a value of a
  // column mostly null or repeated, hash-joins them against a sequential scan of the whole
  // table: measured 35 ms a batch at 15,000 posts, growing with the table, where the index
  // answers 300 values in 3 ms.
  //
  // So is a one-column primary key not loaded as a chain (actors by DID, records, follows
  // and reposts by URI): as a semi-join on a table Postgres has no statistics for yet (a new
  // fork's, growing faster than autovacuum analyzes it, or none at all), it too was hashed
  // against a sequential scan, up to 27 ms a read of `actor` at the 500k corpus.
  const probeEach =
    (!byPk &&
      !uniqueAlone &&
      !t.unique.some((u) => u.length === columns.length && u.every((c) => columns.includes(c)))) ||
    (byPk && pk.length === 1 && !chain)
  const vars = columns.map((_, i) => sql.raw(`v${i}`))
  // A chain load carries whole rows through the recursion, each level one probe of the
  // primary key per row: joining the reached keys back to the table afterwards lets the
  // planner, which cannot estimate the recursion, hash-join it against a scan of the whole
  // table.
  const selectFrom = (alias: string) =>
    sql.join(
      t.columns.map((c) =>
        t.json.has(c)
          ? sql`${sql.ref(`${alias}.${c}`)}::text as ${sql.ref(c)}`
          : sql`${sql.ref(`${alias}.${c}`)}`,
      ),
    )
  const query =
    chain && byPk && pk.length === 1
      ? sql<Row>`
          with recursive chain as (
            select ${selectFrom('s')}, 0 as ${sql.ref(DEPTH)} from ${sql.table(table)} s
            where (${cols}) in (select * from unnest(${unnest}))
            union all
            select ${selectFrom('t')}, c.${sql.ref(DEPTH)} + 1
            from chain c join ${sql.table(table)} t on t.${sql.ref(pk[0]!)} = c.${sql.ref(chain.column)}
            where c.${sql.ref(DEPTH)} < ${chain.depth}
          )
          select distinct on (${sql.ref(pk[0]!)}) * from chain
          order by ${sql.ref(pk[0]!)}, ${sql.ref(DEPTH)}`
      : uniqueAlone
        ? sql<Row>`
          select f.* from unnest(${unnest}) u(v) cross join lateral (
            select ${select} from ${sql.table(table)}
            where ${cols} >= u.v and ${cols} <= u.v limit 1
          ) f`
        : probeEach
          ? sql<Row>`
          select f.* from unnest(${unnest}) u(${sql.join(vars)}) cross join lateral (
            select ${select} from ${sql.table(table)}
            where ${sql.join(
              columns.map((c, i) => sql`${sql.ref(c)}::text = u.${vars[i]}`),
              sql` and `,
            )}
            offset 0
          ) f`
          : sql<Row>`
          select ${select} from ${sql.table(table)}
          where (${cols}) in (select * from unnest(${unnest}))`
  return { query, chain, byPk }
}

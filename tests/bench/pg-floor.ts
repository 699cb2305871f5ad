// The Postgres floor of an ingest run: what it costs Postgres alone to store the rows an indexer
// ended with, in the stock schema with its indexes, with nothing else to do — no reads, no
// planning, no client, no rows that came and went (a like undone later is not there at all).
// Every indexer writing these tables on this machine pays at least this much Postgres CPU per
// event, so it bounds the events/s any indexer can reach with Postgres on the same cores.
import { performance } from 'node:perf_hooks'
import { sql } from 'kysely'
import { createPgDb, migrateToLatest } from '@openplane/db'
import { PG_URL, uniqueName } from '../harness/env.ts'
import { dropSchemas } from '../harness/stock-network.ts'

export interface Floor {
  rows: number
  seconds: number
  /** CPU seconds of every Postgres process over the copy. */
  pgCpu: number
}

export async function postgresFloor(
  from: string,
  tables: readonly string[],
  postgresCpu: () => number,
): Promise<Floor> {
  const schema = uniqueName('bench_floor')
  const db = createPgDb({ url: PG_URL, schema, poolSize: 1 })
  try {
    await migrateToLatest(db)
    // Settle what the run left behind (its WAL, its autovacuum) before the clock starts.
    await sql`checkpoint`.execute(db.db)
    const cpu0 = postgresCpu()
    const t0 = performance.now()
    let rows = 0
    for (const table of tables) {
      const { rows: cols } = await sql<{ column: string }>`
        select column_name as "column" from information_schema.columns
        where table_schema = ${schema} and table_name = ${table} and is_generated = 'NEVER'
        order by ordinal_position
      `.execute(db.db)
      const list = sql.join(cols.map((c) => sql.ref(c.column)))
      const res = await sql`
        insert into ${sql.table(`${schema}.${table}`)} (${list})
        select ${list} from ${sql.table(`${from}.${table}`)}
      `.execute(db.db)
      rows += Number(res.numAffectedRows ?? 0)
    }
    // Commit-time work (the WAL flushed) belongs to the write.
    await sql`checkpoint`.execute(db.db)
    return { rows, seconds: (performance.now() - t0) / 1000, pgCpu: postgresCpu() - cpu0 }
  } finally {
    await db.close()
    await dropSchemas([schema])
  }
}

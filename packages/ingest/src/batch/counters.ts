// Counter deltas are summed over the batch and written once per key at the end, so a hot post
// liked 500 times in a batch is one upsert, and one statement per counter column.
import { sql, type Kysely } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'
import type { Counter } from '@openplane/plugins'

type Db = Kysely<DatabaseSchema>

export class CounterBuffer {
  private deltas = new Map<string, Counter>()

  add(counters: Counter[] | undefined): void {
    for (const c of counters ?? []) {
      const id = `${c.table}\u0000${c.column}\u0000${c.key}`
      const prev = this.deltas.get(id)
      if (prev) prev.delta += c.delta
      else this.deltas.set(id, { ...c })
    }
  }

  /**
   * Writes every summed delta; returns the statements sent. Zero sums still create the row, as
   * the stock's recount would.
   */
  async flush(db: Db): Promise<number> {
    const groups = new Map<string, Counter[]>()
    for (const c of this.deltas.values()) {
      const g = `${c.table}.${c.column}`
      const list = groups.get(g)
      if (list) list.push(c)
      else groups.set(g, [c])
    }
    this.deltas.clear()
    let sent = 0
    for (const list of groups.values()) {
      const { table, column } = list[0]!
      const keyCol = table === 'post_agg' ? 'uri' : 'did'
      const col = sql.ref(column)
      // Two array parameters whatever the count: one per key would make a statement of
      // thousands of parameters to build, send and parse for a batch's hot posts.
      const keys = list.map((c) => c.key)
      const deltas = list.map((c) => c.delta)
      await sql`
        insert into ${sql.table(table)} (${sql.ref(keyCol)}, ${col})
        select * from unnest(${keys}::text[], ${deltas}::bigint[])
        on conflict (${sql.ref(keyCol)})
        do update set ${col} = ${sql.table(table)}.${col} + excluded.${col}
      `.execute(db)
      sent++
    }
    return sent
  }
}

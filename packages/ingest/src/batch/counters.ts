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
      this.deltas.set(id, prev ? ({ ...prev, delta: prev.delta + c.delta } as Counter) : { ...c })
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
      groups.set(g, [...(groups.get(g) ?? []), c])
    }
    this.deltas.clear()
    let sent = 0
    for (const list of groups.values()) {
      const { table, column } = list[0]!
      const keyCol = table === 'post_agg' ? 'uri' : 'did'
      const col = sql.ref(column)
      const rows = sql.join(list.map((c) => sql`(${c.key}, ${c.delta}::bigint)`))
      await sql`
        insert into ${sql.table(table)} (${sql.ref(keyCol)}, ${col}) values ${rows}
        on conflict (${sql.ref(keyCol)})
        do update set ${col} = ${sql.table(table)}.${col} + excluded.${col}
      `.execute(db)
      sent++
    }
    return sent
  }
}

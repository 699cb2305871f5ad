// The index as rows in memory: the Reader a plugin gets, over tables a test fills, so a plugin is
// tested as the pure function it is (collections/*.test.ts), in milliseconds, without a database.
// Rows match a read by equality on every column it names, null and absent alike, values compared
// as Postgres stores them (as text): as the writer's batch state matches them.
import type { Selectable } from 'kysely'
import type { Reader, RecordRef, TableName, Tables, WhereValue } from './types.ts'
import { AtUri } from './util.ts'

type AnyRow = Record<string, unknown>

export class MemoryReader implements Reader {
  private readonly tables = new Map<string, AnyRow[]>()

  /** Adds rows to a table; columns a plugin does not read may be left out. */
  put<T extends TableName>(table: T, ...rows: Partial<Selectable<Tables[T]>>[]): this {
    let held = this.tables.get(table)
    if (!held) this.tables.set(table, (held = []))
    for (const row of rows) held.push({ ...row })
    return this
  }

  rows<T extends TableName>(table: T, where: Record<string, WhereValue>): Selectable<Tables[T]>[] {
    const held = this.tables.get(table) ?? []
    const found = held.filter((row) =>
      Object.entries(where).every(([column, value]) => same(row[column], value)),
    )
    return found.map((row) => ({ ...row })) as Selectable<Tables[T]>[]
  }

  first<T extends TableName>(
    table: T,
    where: Record<string, WhereValue>,
  ): Selectable<Tables[T]> | undefined {
    return this.rows(table, where)[0]
  }
}

function same(a: unknown, b: unknown): boolean {
  if (a == null || b == null) return a == null && b == null
  return a === b || String(a) === String(b)
}

/** A record operation as the writer hands it to a plugin, its URI taken apart. */
export function refAt(uri: string, cid: string, indexedAt: string): RecordRef {
  const at = new AtUri(uri)
  return { uri, did: at.host, collection: at.collection, rkey: at.rkey, cid, indexedAt }
}

// Bulk loading of a userbase into a fresh schema in the stock dataplane's layout: one COPY stream
// per table, all fed by a single pass of the generator, so memory stays bounded and the stock
// dataplane and ours can be pointed at the very same data.
import { once } from 'node:events'
import { createPgDb, migrateToLatest } from '@openplane/db'
import pg from 'pg'
import { from as copyFrom, type CopyStreamQuery } from 'pg-copy-streams'
import type { UserbaseParams } from './params.ts'
import { TABLES, writeUserbaseRows, type RowCounts, type RowSink, type Table } from './rows.ts'
import type { ProgressFn } from './progress.ts'

const CHUNK_CHARS = 1 << 18
/** Sort memory of each index build (a session setting; the server's default is far smaller). */
const INDEX_BUILD_MEMORY = '512MB'
/** Index builds at a time: each is one CPU-bound backend. */
const INDEX_BUILDERS = 2

/** Buffers lines into large writes; asks the producer to wait only when the socket is full. */
class CopySink implements RowSink {
  rows = 0
  private buffer = ''
  private error: Error | undefined
  private readonly stream: CopyStreamQuery

  constructor(client: pg.Client, table: Table) {
    this.stream = client.query(copyFrom(`COPY ${table} (${TABLES[table].join(', ')}) FROM STDIN`))
    this.stream.on('error', (err: Error) => {
      this.error ??= new Error(`COPY into ${table} failed: ${err.message}`, { cause: err })
    })
  }

  push(line: string): Promise<void> | undefined {
    this.buffer += line
    this.rows++
    return this.buffer.length >= CHUNK_CHARS ? this.flush() : undefined
  }

  private flush(): Promise<void> | undefined {
    if (this.error) throw this.error
    const chunk = this.buffer
    this.buffer = ''
    if (this.stream.write(chunk)) return undefined
    // once() rejects if the stream errors while we wait.
    return once(this.stream, 'drain').then(() => undefined)
  }

  async end(): Promise<void> {
    if (this.buffer) void this.flush()
    if (this.error) throw this.error
    const finished = once(this.stream, 'finish')
    this.stream.end()
    await finished
    if (this.error) throw this.error
  }
}

/** An index or a PK/UNIQUE constraint, as the statement that recreates it. */
interface SavedIndex {
  name: string
  create: string
}

/**
 * Drops the indexes and PK/UNIQUE constraints of `tables`, returning the statements that recreate
 * them exactly (same names and definitions, so the catalog is the stock's again afterwards).
 * Building an index once from the loaded rows is several times faster than maintaining it row by
 * row, and packs it denser.
 */
async function dropIndexes(
  client: pg.Client,
  schema: string,
  tables: string[],
): Promise<SavedIndex[]> {
  const constraints = await client.query<{ tbl: string; name: string; def: string }>(
    `SELECT c.relname AS tbl, con.conname AS name, pg_get_constraintdef(con.oid) AS def
       FROM pg_constraint con
       JOIN pg_class c ON c.oid = con.conrelid
       JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relname = ANY($2) AND con.contype IN ('p', 'u')
      ORDER BY c.relname, con.conname`,
    [schema, tables],
  )
  const indexes = await client.query<{ name: string; def: string }>(
    `SELECT i.indexname AS name, i.indexdef AS def
       FROM pg_indexes i
      WHERE i.schemaname = $1 AND i.tablename = ANY($2)
        AND NOT EXISTS (
          SELECT 1 FROM pg_constraint con
           WHERE con.conindid = format('%I.%I', i.schemaname, i.indexname)::regclass
        )
      ORDER BY i.tablename, i.indexname`,
    [schema, tables],
  )
  const saved: SavedIndex[] = []
  for (const { name, def } of indexes.rows) {
    await client.query(`DROP INDEX "${schema}"."${name}"`)
    saved.push({ name, create: def })
  }
  for (const { tbl, name, def } of constraints.rows) {
    await client.query(`ALTER TABLE "${schema}"."${tbl}" DROP CONSTRAINT "${name}"`)
    // Keys first: the other indexes are then built on a table known to be duplicate-free.
    saved.unshift({
      name,
      create: `ALTER TABLE "${schema}"."${tbl}" ADD CONSTRAINT "${name}" ${def}`,
    })
  }
  return saved
}

/** Rebuilds the saved indexes, `workers` at a time on their own connections. */
async function rebuildIndexes(
  clients: pg.Client[],
  saved: SavedIndex[],
  progress?: ProgressFn,
): Promise<void> {
  let next = 0
  let done = 0
  progress?.('indexes', 0, saved.length)
  await Promise.all(
    clients.map(async (client) => {
      await client.query(`SET maintenance_work_mem TO '${INDEX_BUILD_MEMORY}'`)
      for (let i = next++; i < saved.length; i = next++) {
        await client.query(saved[i]!.create)
        progress?.('indexes', ++done, saved.length)
      }
    }),
  )
}

export interface LoadOptions {
  url: string
  schema: string
  progress?: ProgressFn
}

export interface LoadReport {
  schema: string
  counts: RowCounts
  rows: Record<Table, number>
  elapsedMs: number
  /** COPY of all rows (indexes dropped), index rebuild, ANALYZE. */
  phasesMs: { copy: number; indexes: number; analyze: number }
  rowsPerSecond: number
  followsPerSecond: number
  /** pg_total_relation_size of each table (heap, indexes, TOAST) after ANALYZE. */
  tableBytes: Record<Table, number>
  /** follow's size plus the follow records' share of record's, per follow. */
  bytesPerFollow: number
}

/**
 * Creates `schema` (stock layout via our migrations) and loads the userbase into it: indexes are
 * dropped, the rows copied, the indexes rebuilt, the tables analyzed. Refuses a schema that already
 * has actors (the counters are computed for this base alone); if loading fails midway, drop the
 * schema and load again.
 */
export async function loadUserbase(params: UserbaseParams, opts: LoadOptions): Promise<LoadReport> {
  const db = createPgDb({ url: opts.url, schema: opts.schema, poolSize: 1 })
  try {
    await migrateToLatest(db)
  } finally {
    await db.close()
  }
  const tables = Object.keys(TABLES) as Table[]
  const connect = async (): Promise<pg.Client> => {
    const client = new pg.Client({ connectionString: opts.url })
    await client.connect()
    // Schema name was checked by createPgDb. Each COPY commits on its own; a lost one is redone
    // by loading again into a fresh schema, so the WAL flush per commit buys nothing here.
    await client.query(`SET search_path TO "${opts.schema}", public`)
    await client.query('SET synchronous_commit TO off')
    return client
  }
  const clients = await Promise.all(tables.map(connect))
  try {
    const [control] = clients as [pg.Client]
    const { rows } = await control.query<{ n: string }>('SELECT count(*) AS n FROM actor')
    if (Number(rows[0]?.n) > 0) {
      throw new Error(
        `schema "${opts.schema}" already has ${rows[0]?.n} actors: load into a fresh schema`,
      )
    }
    const started = performance.now()
    const saved = await dropIndexes(control, opts.schema, tables)
    const sinks = Object.fromEntries(
      tables.map((t, i) => [t, new CopySink(clients[i]!, t)]),
    ) as Record<Table, CopySink>
    const counts = await writeUserbaseRows(params, sinks, opts.progress)
    await Promise.all(Object.values(sinks).map((s) => s.end()))
    const copied = performance.now()
    await rebuildIndexes(clients.slice(0, INDEX_BUILDERS), saved, opts.progress)
    const indexed = performance.now()
    opts.progress?.('analyze', 0, 1)
    for (const t of tables) await control.query(`ANALYZE ${t}`)
    opts.progress?.('analyze', 1, 1)
    const elapsedMs = performance.now() - started
    const phasesMs = {
      copy: copied - started,
      indexes: indexed - copied,
      analyze: elapsedMs - (indexed - started),
    }

    const tableBytes = {} as Record<Table, number>
    for (const t of tables) {
      const res = await control.query<{ bytes: string }>(
        'SELECT pg_total_relation_size($1::regclass) AS bytes',
        [`"${opts.schema}".${t}`],
      )
      tableBytes[t] = Number(res.rows[0]?.bytes)
    }
    const rowsByTable = Object.fromEntries(tables.map((t) => [t, sinks[t].rows])) as Record<
      Table,
      number
    >
    const totalRows = Object.values(rowsByTable).reduce((a, b) => a + b, 0)
    const followShare = rowsByTable.record > 0 ? counts.follows / rowsByTable.record : 0
    return {
      schema: opts.schema,
      counts,
      rows: rowsByTable,
      elapsedMs,
      phasesMs,
      rowsPerSecond: totalRows / (elapsedMs / 1000),
      followsPerSecond: counts.follows / (elapsedMs / 1000),
      tableBytes,
      bytesPerFollow:
        counts.follows > 0
          ? (tableBytes.follow + tableBytes.record * followShare) / counts.follows
          : 0,
    }
  } finally {
    await Promise.all(clients.map((c) => c.end()))
  }
}

export function formatLoadReport(r: LoadReport): string {
  const mib = (b: number): string => `${(b / 2 ** 20).toFixed(1)} MiB`
  const sec = (ms: number): string => `${(ms / 1000).toFixed(1)} s`
  const lines = [
    `schema     ${r.schema}`,
    `actors     ${r.counts.actors}   follows ${r.counts.follows}   posts ${r.counts.posts}`,
    `loaded     in ${sec(r.elapsedMs)}: ${Math.round(r.rowsPerSecond)} rows/s, ` +
      `${Math.round(r.followsPerSecond)} follows/s`,
    `phases     copy ${sec(r.phasesMs.copy)}, index rebuild ${sec(r.phasesMs.indexes)}, ` +
      `analyze ${sec(r.phasesMs.analyze)}`,
    `per follow ${r.bytesPerFollow.toFixed(0)} bytes (follow + its share of record)`,
  ]
  for (const [t, bytes] of Object.entries(r.tableBytes)) {
    lines.push(`  ${t.padEnd(12)} ${String(r.rows[t as Table]).padStart(10)} rows  ${mib(bytes)}`)
  }
  return lines.join('\n')
}

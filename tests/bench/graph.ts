// pnpm bench:graph — the in-memory roaring graph (@openplane/graph) on a generated power-law follow
// graph in the stock `follow` table: load time from Postgres and from a snapshot, snapshot size,
// memory per edge, and GetFollowsFollowing latency from the graph vs the stock's SQL on the same
// data. Not part of CI.
//   BENCH_USERS (default 100000), BENCH_SEED (default 1), BENCH_KEEP_SCHEMA=1, OPENPLANE_TEST_PG_URL
//   BENCH_SCHEMA=<schema>: measure a userbase the toolkit loaded there (`pnpm sim load-userbase`;
//     user r is the r-th most followed) instead of generating one; the schema is kept.
//
// The graph: the user of rank r gets min(N-1, round(5N/r)) followers drawn at random; a few heavy
// viewers also follow HEAVY_FOLLOWS random users on top.
import { fork } from 'node:child_process'
import { performance } from 'node:perf_hooks'
import { createPgDb, migrateToLatest, type Db } from '@openplane/db'
import { ActorIds, Graph } from '@openplane/graph'
import { sql } from 'kysely'
import { didFor, idForDid } from '@openplane/sim'
import { random, stockFollowsFollowing } from '../graph/fixture.ts'
import { PG_URL, uniqueName } from '../harness/env.ts'

const USERS = Number(process.env.BENCH_USERS ?? 100_000)
const SEED = Number(process.env.BENCH_SEED ?? 1)
const DENSITY = 5
const HEAVY_VIEWERS = 4
const TYPICAL_VIEWERS = 4
const HEAVY_FOLLOWS = Math.min(USERS - 1, 5000)
const TOP_TARGETS = Math.min(USERS, 500)
const INSERT_ROWS = 10_000

const log = (...a: unknown[]) => console.log('[bench:graph]', ...a)
const secs = (ms: number) => `${(ms / 1000).toFixed(2)} s`
const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`

async function timed<T>(fn: () => Promise<T>): Promise<[T, number]> {
  const start = performance.now()
  const value = await fn()
  return [value, performance.now() - start]
}

function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN
}

// ---------------------------------------------------------------------------------------------
// Memory, measured in a child process of its own so the parent's garbage does not blur RSS.

type Usage = { rss: number; heap: number; external: number }

interface MemoryReport {
  mode: string
  edges: number
  serialized: number
  stats?: ReturnType<Graph['memoryStats']>
  /** Mean growth per copy after the first (see memoryChild). */
  delta: Usage
}

function usage(): Usage {
  globalThis.gc?.()
  const m = process.memoryUsage()
  return { rss: m.rss, heap: m.heapUsed, external: m.external }
}

const minus = (a: Usage, b: Usage): Usage => ({
  rss: a.rss - b.rss,
  heap: a.heap - b.heap,
  external: a.external - b.external,
})

/**
 * What one RoaringBitmap32 object costs beyond its content (native wrapper, V8 object, handles,
 * roaring header): ~320 B RSS empty, ~450 B with a container, measured with roaring 2.7.0.
 */
const BITMAP_OBJECT_BYTES = 450

/** Copies loaded per measurement; the first warms up V8's heap, malloc and the pool. */
const COPIES = 3

/**
 * Loads the id mapping only ('ids'), or it and the graph from a snapshot or from Postgres,
 * COPIES times, all kept: the mean growth per copy after the first is the marginal cost.
 */
async function memoryChild(mode: string, schema: string): Promise<void> {
  const db = createPgDb({ url: PG_URL, schema, poolSize: 1 })
  const load = async () => {
    const ids = new ActorIds(db)
    await ids.load()
    if (mode === 'snapshot') return (await Graph.loadSnapshot(db, { ids }))?.graph ?? ids
    if (mode === 'postgres') return (await Graph.loadFromPostgres(db, { ids })).graph
    return ids
  }
  const kept = [await load()]
  const before = usage()
  while (kept.length < COPIES) kept.push(await load())
  const after = usage()
  const delta = minus(after, before)
  const last = kept.at(-1)
  const graph = last instanceof Graph ? last : undefined
  const report: MemoryReport = {
    mode,
    edges: graph?.edgeCount ?? 0,
    serialized: graph?.serializedSizeInBytes() ?? 0,
    stats: graph?.memoryStats(),
    delta: {
      rss: delta.rss / (COPIES - 1),
      heap: delta.heap / (COPIES - 1),
      external: delta.external / (COPIES - 1),
    },
  }
  process.send?.(report)
  await db.close()
}

function measureMemory(mode: string, schema: string): Promise<MemoryReport> {
  return new Promise((resolve, reject) => {
    const child = fork(import.meta.filename, ['--memory', mode, schema], {
      execArgv: ['--expose-gc'],
    })
    child.on('message', (m) => resolve(m as MemoryReport))
    child.on('error', reject)
    child.on('exit', (code) => code !== 0 && reject(new Error(`memory child exited ${code}`)))
  })
}

// ---------------------------------------------------------------------------------------------
// Generating the graph straight into `follow`.

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567'

function makeDids(n: number, rand: () => number): string[] {
  return Array.from({ length: n }, () => {
    let s = 'did:plc:'
    for (let i = 0; i < 24; i++) s += BASE32[Math.floor(rand() * 32)]
    return s
  })
}

/**
 * A toolkit-loaded userbase: users by rank (`didFor`), its follow count, and as heavy viewers
 * the users following the most accounts outside the top targets.
 */
async function fromToolkit(db: Db): Promise<Generated> {
  const { rows } = await sql<{ n: string }>`SELECT count(*) AS n FROM follow`.execute(db.db)
  const dids = Array.from({ length: USERS }, (_, i) => didFor(i + 1))
  const { rows: top } = await sql<{ creator: string }>`
    SELECT creator FROM follow GROUP BY creator ORDER BY count(*) DESC LIMIT ${HEAVY_VIEWERS + TOP_TARGETS}
  `.execute(db.db)
  const heavy = top
    .map((r) => idForDid(r.creator, USERS))
    .filter((id): id is number => id !== undefined && id > TOP_TARGETS)
    .slice(0, HEAVY_VIEWERS)
    .map((id) => id - 1)
  return { dids, follows: Number(rows[0]?.n), heavy }
}

interface Generated {
  dids: string[]
  follows: number
  heavy: number[]
}

/**
 * Runs `load` with follow's indexes and constraints dropped, then recreates them from their own
 * catalog definitions: a bulk load then a sort per index, instead of millions of random inserts.
 */
async function withoutIndexes<T>(db: Db, load: () => Promise<T>): Promise<T> {
  const { rows: constraints } = await sql<{ name: string; def: string }>`
    SELECT conname AS name, pg_get_constraintdef(oid) AS def FROM pg_constraint
    WHERE conrelid = 'follow'::regclass ORDER BY conname
  `.execute(db.db)
  const { rows: indexes } = await sql<{ name: string; def: string }>`
    SELECT indexname AS name, indexdef AS def FROM pg_indexes
    WHERE schemaname = current_schema() AND tablename = 'follow'
      AND indexname NOT IN (SELECT conname FROM pg_constraint WHERE conrelid = 'follow'::regclass)
    ORDER BY indexname
  `.execute(db.db)
  for (const { name } of constraints) {
    await sql`ALTER TABLE follow DROP CONSTRAINT ${sql.id(name)}`.execute(db.db)
  }
  for (const { name } of indexes) await sql`DROP INDEX ${sql.id(name)}`.execute(db.db)
  const result = await load()
  await db.db.transaction().execute(async (tx) => {
    await sql`SET LOCAL maintenance_work_mem = '1GB'`.execute(tx)
    for (const { name, def } of constraints) {
      await sql`ALTER TABLE follow ADD CONSTRAINT ${sql.id(name)} ${sql.raw(def)}`.execute(tx)
    }
    for (const { def } of indexes) await sql.raw(def).execute(tx)
  })
  return result
}

async function generate(db: Db, rand: () => number): Promise<Generated> {
  const dids = makeDids(USERS, rand)
  // Heavy viewers among the non-celebrities; their random-phase follows are tracked so the extra
  // ones do not collide with the unique (creator, subjectDid).
  const heavy: number[] = []
  while (heavy.length < HEAVY_VIEWERS) {
    const u = TOP_TARGETS + Math.floor(rand() * (USERS - TOP_TARGETS))
    if (!heavy.includes(u)) heavy.push(u)
  }
  const heavyFollows = new Map(heavy.map((u) => [u, new Set<number>()]))
  // A persistent permutation: each partial Fisher-Yates pass over it draws a uniform subset.
  const perm = Int32Array.from({ length: USERS }, (_, i) => i)
  const draw = (k: number, exclude: (u: number) => boolean, out: (u: number) => void) => {
    let got = 0
    for (let j = 0; j < USERS && got < k; j++) {
      const swap = j + Math.floor(rand() * (USERS - j))
      const u = perm[swap] as number
      perm[swap] = perm[j] as number
      perm[j] = u
      if (!exclude(u)) {
        out(u)
        got++
      }
    }
  }

  let rows: [number, number][] = []
  let written = 0
  let inFlight: Promise<void> = Promise.resolve()
  const flush = async () => {
    const batch = rows
    rows = []
    await inFlight
    inFlight = insertFollows(db, dids, batch, written)
    written += batch.length
  }
  for (let target = 0; target < USERS; target++) {
    const k = Math.min(USERS - 1, Math.round((USERS * DENSITY) / (target + 1)))
    draw(
      k,
      (u) => u === target,
      (u) => {
        rows.push([u, target])
        heavyFollows.get(u)?.add(target)
      },
    )
    if (rows.length >= INSERT_ROWS) await flush()
  }
  for (const [u, followed] of heavyFollows) {
    const extra = HEAVY_FOLLOWS - followed.size
    draw(
      extra,
      (t) => t === u || followed.has(t),
      (t) => rows.push([u, t]),
    )
    if (rows.length >= INSERT_ROWS) await flush()
  }
  await flush()
  await inFlight
  return { dids, follows: written, heavy }
}

const CID_PREFIX = 'bafyreib3qk7mzcv2xl5o4wnj6thdr2eyqagp6sfl4xuvzmoq'

async function insertFollows(db: Db, dids: string[], batch: [number, number][], offset: number) {
  const uri: string[] = []
  const cid: string[] = []
  const creator: string[] = []
  const subject: string[] = []
  const at: string[] = []
  const year = Date.UTC(2024, 0, 1)
  for (const [i, [a, b]] of batch.entries()) {
    const n = offset + i
    const did = dids[a] as string
    uri.push(`at://${did}/app.bsky.graph.follow/3l${n.toString(32).padStart(11, '0')}`)
    cid.push(CID_PREFIX + n.toString(32).padStart(10, '0'))
    creator.push(did)
    subject.push(dids[b] as string)
    at.push(new Date(year + ((n * 7919) % 31_536_000) * 1000).toISOString())
  }
  await sql`
    INSERT INTO follow (uri, cid, creator, "subjectDid", "createdAt", "indexedAt")
    SELECT * FROM unnest(${uri}::varchar[], ${cid}::varchar[], ${creator}::varchar[],
      ${subject}::varchar[], ${at}::varchar[], ${at}::varchar[])
  `.execute(db.db)
}

/** follow's index and constraint definitions, to check they come back exactly. */
async function followIndexes(db: Db): Promise<string> {
  const { rows } = await sql<{ def: string }>`
    SELECT indexdef AS def FROM pg_indexes
    WHERE schemaname = current_schema() AND tablename = 'follow'
    UNION ALL
    SELECT conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint
    WHERE conrelid = 'follow'::regclass
    ORDER BY 1
  `.execute(db.db)
  return rows.map((r) => r.def).join('\n')
}

// ---------------------------------------------------------------------------------------------
// GetFollowsFollowing: the graph vs the stock's per-target query.

interface Latencies {
  graph: number[]
  sql: number[]
  graphRequest: number[]
  sqlRequest: number[]
  mismatches: number
  hits: number
}

async function followsFollowing(
  db: Db,
  graph: Graph,
  viewers: string[],
  targets: string[],
): Promise<Latencies> {
  const out: Latencies = {
    graph: [],
    sql: [],
    graphRequest: [],
    sqlRequest: [],
    mismatches: 0,
    hits: 0,
  }
  for (const viewer of viewers) {
    // The whole 500-target request, as one rpc: the graph answers it in one call, the stock runs
    // one query per target, sequentially.
    const start = performance.now()
    graph.followsFollowing(viewer, targets)
    out.graphRequest.push(performance.now() - start)
    for (const target of targets) {
      const t0 = performance.now()
      const [ours] = graph.followsFollowing(viewer, [target])
      out.graph.push(performance.now() - t0)
      const t1 = performance.now()
      const stock = await stockFollowsFollowing(db, viewer, target)
      out.sql.push(performance.now() - t1)
      const a = [...(ours?.dids ?? [])].sort()
      const b = stock.sort()
      if (a.length !== b.length || a.some((d, i) => d !== b[i])) out.mismatches++
      if (a.length > 0) out.hits++
    }
    // Per-request SQL time: the queries of this viewer, summed.
    out.sqlRequest.push(out.sql.slice(-targets.length).reduce((s, x) => s + x, 0))
  }
  return out
}

function latencyRows(label: string, l: Latencies): string[] {
  const g = [...l.graph].sort((a, b) => a - b)
  const s = [...l.sql].sort((a, b) => a - b)
  const gr = [...l.graphRequest].sort((a, b) => a - b)
  const sr = [...l.sqlRequest].sort((a, b) => a - b)
  const fmt = (ms: number) => (ms < 1 ? `${(ms * 1000).toFixed(1)} µs` : `${ms.toFixed(2)} ms`)
  const ratio = (a: number, b: number) => `${(b / a).toFixed(0)}x`
  return [
    `| ${label}, one target: p50 | ${fmt(quantile(g, 0.5))} | ${fmt(quantile(s, 0.5))} | ${ratio(quantile(g, 0.5), quantile(s, 0.5))} |`,
    `| ${label}, one target: p99 | ${fmt(quantile(g, 0.99))} | ${fmt(quantile(s, 0.99))} | ${ratio(quantile(g, 0.99), quantile(s, 0.99))} |`,
    `| ${label}, ${TOP_TARGETS} targets in one request: p50 | ${fmt(quantile(gr, 0.5))} | ${fmt(quantile(sr, 0.5))} | ${ratio(quantile(gr, 0.5), quantile(sr, 0.5))} |`,
  ]
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const rand = random(SEED)
  const loaded = process.env.BENCH_SCHEMA
  const schema = loaded ?? uniqueName('bench_graph')
  const db = createPgDb({ url: PG_URL, schema, poolSize: 4 })
  try {
    await migrateToLatest(db)
    log(`schema ${schema}; ${USERS} users, follower density ${DENSITY}, seed ${SEED}`)

    const indexesBefore = await followIndexes(db)
    const [gen, genMs] = await timed(() =>
      loaded ? fromToolkit(db) : withoutIndexes(db, () => generate(db, rand)),
    )
    if ((await followIndexes(db)) !== indexesBefore) throw new Error('follow indexes changed')
    // What autovacuum does after a bulk insert anyway (PG 13+ vacuums on inserts too): statistics
    // for the stock query's plans, and the visibility map that lets index-only scans skip the heap.
    await sql`VACUUM (ANALYZE) follow`.execute(db.db)
    const { rows: size } = await sql<{ bytes: number }>`
      SELECT pg_total_relation_size('follow')::bigint AS bytes
    `.execute(db.db)
    log(
      `generated ${gen.follows} follows (${(gen.follows / USERS).toFixed(1)} per user; ` +
        `${HEAVY_VIEWERS} heavy viewers following ${HEAVY_FOLLOWS}) in ${secs(genMs)}; ` +
        `follow table with indexes: ${mib(size[0]?.bytes ?? 0)}`,
    )

    // (a) Loading.
    const [{ graph }, loadMs] = await timed(() => Graph.loadFromPostgres(db))
    log(`load from Postgres, interning ${graph.ids.size} new DIDs: ${secs(loadMs)}`)
    const [, warmMs] = await timed(() => Graph.loadFromPostgres(db))
    log(`load from Postgres, DIDs already interned (a restart): ${secs(warmMs)}`)
    const [meta, snapMs] = await timed(() => graph.snapshot(db, 12345))
    log(
      `snapshot: ${meta.bytes} bytes (${mib(meta.bytes)}) in ${meta.chunkCount} chunks, ${secs(snapMs)}`,
    )
    const [restored, restoreMs] = await timed(() => Graph.loadSnapshot(db))
    const [, idsMs] = await timed(() => new ActorIds(db).load())
    log(
      `restore from snapshot: ${secs(restoreMs)} (of which the id mapping alone: ${secs(idsMs)}); ` +
        `edges ${restored?.graph.edgeCount}, cursor ${restored?.snapshot.cursor}`,
    )
    if (restored?.graph.edgeCount !== gen.follows || graph.edgeCount !== gen.follows) {
      throw new Error('edge counts differ from the follow table')
    }

    // (b) Memory.
    const serialized = graph.serializedSizeInBytes()
    log(
      `serialized bitmaps (portable, both directions): ${serialized} bytes = ` +
        `${(serialized / gen.follows).toFixed(2)} bytes per edge`,
    )
    const idsOnly = await measureMemory('ids', schema)
    log(
      `memory, id mapping alone (mean of copies 2-3 in its own process, after gc): RSS +${mib(idsOnly.delta.rss)}, ` +
        `heap +${mib(idsOnly.delta.heap)} for ${gen.dids.length} DIDs`,
    )
    const mem: { mode: string; graph: Usage; all: Usage; edges: number; accounted?: number }[] = []
    for (const mode of ['snapshot', 'postgres']) {
      const m = await measureMemory(mode, schema)
      const graphOnly = minus(m.delta, idsOnly.delta)
      const row: (typeof mem)[number] = { mode, graph: graphOnly, all: m.delta, edges: m.edges }
      mem.push(row)
      const per = (bytes: number) => (bytes / m.edges).toFixed(2)
      log(
        `memory, graph built from ${mode} (mean of copies 2-3 in its own process, after gc): ` +
          `bitmaps RSS +${mib(graphOnly.rss)} = ${per(graphOnly.rss)} B/edge ` +
          `(heap +${mib(graphOnly.heap)}, external +${mib(graphOnly.external)}); ` +
          `with the id mapping RSS +${mib(m.delta.rss)} = ${per(m.delta.rss)} B/edge`,
      )
      let accounted = 0
      for (const [direction, st] of Object.entries(m.stats ?? {})) {
        accounted += st.arena + st.index + st.live + st.liveSets * BITMAP_OBJECT_BYTES
        log(
          `  ${direction}: arena ${mib(st.arena)} (garbage ${mib(st.garbage)}), ` +
            `${st.liveSets} live bitmaps holding ${mib(st.live)} serialized, index ${mib(st.index)}`,
        )
      }
      row.accounted = accounted
      log(
        `  accounted (arena segments + index + live bitmaps + ${BITMAP_OBJECT_BYTES} B per bitmap ` +
          `object): ${mib(accounted)} = ${per(accounted)} B/edge`,
      )
    }

    // (c) GetFollowsFollowing.
    const targets = gen.dids.slice(0, TOP_TARGETS)
    const typical: string[] = []
    while (typical.length < TYPICAL_VIEWERS) {
      const u = TOP_TARGETS + Math.floor(rand() * (USERS - TOP_TARGETS))
      if (!gen.heavy.includes(u)) typical.push(gen.dids[u] as string)
    }
    const heavy = gen.heavy.map((u) => gen.dids[u] as string)
    const counts = (vs: string[]) => vs.map((v) => graph.followingCount(v)).join(', ')
    log(`typical viewers follow ${counts(typical)}; heavy viewers follow ${counts(heavy)}`)
    // Warm both sides once (plans, caches), then measure.
    await followsFollowing(db, graph, typical.slice(0, 1), targets.slice(0, 50))
    const [typ, typMs] = await timed(() => followsFollowing(db, graph, typical, targets))
    const [hvy, hvyMs] = await timed(() => followsFollowing(db, graph, heavy, targets))
    log(
      `GetFollowsFollowing: ${typ.graph.length + hvy.graph.length} (viewer, target) pairs in ` +
        `${secs(typMs + hvyMs)}; results differing from the stock query: ` +
        `${typ.mismatches + hvy.mismatches}; non-empty: typical ${typ.hits}, heavy ${hvy.hits}`,
    )

    console.log('')
    console.log(`| ${USERS} users, ${gen.follows} follows | figure |`)
    console.log('| --- | ---: |')
    console.log(`| load from Postgres (interning all DIDs) | ${secs(loadMs)} |`)
    console.log(`| load from Postgres (DIDs interned) | ${secs(warmMs)} |`)
    console.log(`| snapshot write | ${secs(snapMs)} |`)
    console.log(`| snapshot size | ${mib(meta.bytes)} in ${meta.chunkCount} chunks |`)
    console.log(`| restore from snapshot (incl. id mapping ${secs(idsMs)}) | ${secs(restoreMs)} |`)
    console.log(
      `| serialized bitmaps per edge, both directions | ${(serialized / gen.follows).toFixed(2)} B |`,
    )
    for (const m of mem) {
      const per = (bytes: number) => `${(bytes / m.edges).toFixed(2)} B`
      console.log(`| RSS per edge, bitmaps built from ${m.mode} | ${per(m.graph.rss)} |`)
      console.log(`| RSS per edge incl. id mapping, from ${m.mode} | ${per(m.all.rss)} |`)
      console.log(`| accounted bytes per edge, from ${m.mode} | ${per(m.accounted ?? NaN)} |`)
    }
    console.log('')
    console.log(
      `| GetFollowsFollowing, ${TOP_TARGETS} most-followed targets | graph | stock SQL | ratio |`,
    )
    console.log('| --- | ---: | ---: | ---: |')
    for (const line of latencyRows(`${TYPICAL_VIEWERS} typical viewers`, typ)) console.log(line)
    for (const line of latencyRows(`${HEAVY_VIEWERS} heavy viewers`, hvy)) console.log(line)
  } finally {
    if (!process.env.BENCH_KEEP_SCHEMA && !process.env.BENCH_SCHEMA) {
      await sql`DROP SCHEMA IF EXISTS ${sql.id(schema)} CASCADE`.execute(db.db)
    }
    await db.close()
  }
}

const [flag, mode, schema] = process.argv.slice(2)
if (flag === '--memory' && mode && schema) await memoryChild(mode, schema)
else await main()

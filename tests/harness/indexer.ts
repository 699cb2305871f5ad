// Our indexer in-process, subscribed to a dev-env PDS firehose and writing its own schema, plus a
// table-by-table comparison with the schema the stock indexer filled from the same firehose.
import type { TestNetwork } from '@atproto/dev-env'
import { Community, type CommunityOptions } from '@openplane/community'
import { createPgDb, migrateToLatest, type Db } from '@openplane/db'
import { createIdentity } from '@openplane/identity'
import { IdentityPrefetch, Indexer, lookupThread, Writer, type SourceGap } from '@openplane/ingest'
import { indexedCollections } from '@openplane/plugins'
import pg from 'pg'
import { aggRows } from './counters.ts'
import { PG_URL, uniqueName } from './env.ts'
import { dropSchemas } from './stock-network.ts'

export interface OurIndexer {
  schema: string
  db: Db
  indexer: Indexer
  writer: Writer
  /** Waits until everything the PDS has sequenced so far is applied. */
  catchUp(): Promise<void>
  close(opts?: { keepSchema?: boolean }): Promise<void>
}

export interface IndexerTarget {
  /** ws(s):// base URL of a subscribeRepos endpoint. */
  source: string
  plcUrl: string
  /** Resolve `*.test` handles through this PDS. */
  testPdsUrl?: string
  /** Awaited by catchUp(): the seq to wait for. */
  headSeq?: () => Promise<number | null | undefined>
}

export async function startIndexerOn(
  target: IndexerTarget,
  opts: {
    schema?: string
    batchSize?: number
    verify?: boolean
    headProbeMs?: number
    decodeWorkers?: number
    /** Where to start reading (default: seq 0). */
    initialCursor?: number
    /** The source is Jetstream (messages compressed or not), filtered to what the plugins index. */
    jetstream?: { compress: boolean }
    /** Index only this community's accounts. */
    community?: CommunityOptions
    /** The source left a gap (a cursor past its replay window). */
    onGap?: (gap: SourceGap) => void
    /** Jetstream: a first event this many seconds after the cursor is a gap (default 60). */
    jetstreamGapSeconds?: number
    /** How long an identity lookup may take (default 1 s: tests of unresponsive hosts). */
    identityTimeoutMs?: number
    /** Batches written on the writer's own thread instead of the transaction thread. */
    noTransactionThread?: boolean
    /** Keys whose committed rows the writer keeps between batches (default: the writer's). */
    keptRows?: number
    /**
     * Called once the indexer's threads (decode, lookups, transactions) have loaded, just before
     * it starts reading: a bench starts its clock there, start-up being no cost per event.
     */
    onReady?: () => void
  } = {},
): Promise<OurIndexer> {
  const schema = opts.schema ?? uniqueName('op_idx')
  const db = createPgDb({ url: PG_URL, schema, poolSize: 4 })
  await migrateToLatest(db)
  const identityOptions = {
    plcUrl: target.plcUrl,
    allowPrivateNetwork: true,
    timeoutMs: opts.identityTimeoutMs ?? 1000,
    testHandles: target.testPdsUrl ? { suffixes: ['.test'], pdsUrl: target.testPdsUrl } : undefined,
  }
  const identity = createIdentity(identityOptions)
  // As the dataplane runs: the writer's lookups on their own thread.
  const deps = lookupThread({
    identity: identityOptions,
    timeoutMs: opts.identityTimeoutMs ?? 1000,
  })
  const community = opts.community && (await Community.open(db.db, opts.community, false))
  const writer = new Writer(db.db, deps, {
    scope: community,
    transactions: opts.noTransactionThread ? undefined : db.transactions,
    ...(opts.keptRows !== undefined && { keptRows: opts.keptRows }),
  })
  if (community) writer.onCommitted(community.onCommitted)
  const prefetch = new IdentityPrefetch(db.db, deps)
  const indexer = new Indexer({
    source: target.source,
    db: db.db,
    writer,
    idResolver: identity.idResolver,
    verify: opts.verify ?? false,
    // Frames decode on a worker, as the dataplane runs by default.
    decodeWorkers: opts.decodeWorkers ?? 1,
    identity: identityOptions,
    keys: (did, refresh) => deps.signingKey(did, refresh),
    batchSize: opts.batchSize ?? 100,
    batchWaitMs: 5,
    initialCursor: opts.initialCursor ?? 0,
    prefetch,
    headProbeMs: opts.headProbeMs ?? 0,
    onGap: opts.onGap,
    jetstreamGapSeconds: opts.jetstreamGapSeconds,
    jetstream: opts.jetstream && {
      compress: opts.jetstream.compress,
      wantedCollections: indexedCollections(),
    },
  })
  if (opts.onReady) {
    const transactions = opts.noTransactionThread ? undefined : db.transactions
    await Promise.all([indexer.started(), deps.started(), transactions?.started()])
    opts.onReady()
  }
  await indexer.start()
  return {
    schema,
    db,
    indexer,
    writer,
    async catchUp() {
      const seq = await target.headSeq?.()
      if (seq !== null && seq !== undefined) await indexer.waitFor(seq)
    },
    async close(closeOpts = {}) {
      await indexer.stop()
      prefetch.stop()
      await deps.stop()
      await db.close()
      if (!closeOpts.keepSchema) await dropSchemas([schema])
    },
  }
}

/** Our indexer on a dev-env network's PDS firehose. */
export function startOurIndexer(
  network: TestNetwork,
  opts: { schema?: string; batchSize?: number; verify?: boolean } = {},
): Promise<OurIndexer> {
  return startIndexerOn(
    {
      source: network.pds.url.replace(/^http/, 'ws'),
      plcUrl: network.plc.url,
      testPdsUrl: network.pds.url,
      headSeq: () => network.pds.ctx.sequencer.curr(),
    },
    opts,
  )
}

/** Column lists that legitimately differ between two indexers (serial ids). */
const IGNORED: Record<string, string[]> = { notification: ['id'] }

type Row = Record<string, unknown>

/**
 * Columns the stock fills from the wall clock while indexing (an `unverified` notification's
 * sortAt, a soft-deleted OP reply's deletedAt, the createdAt of a profile record without one):
 * two indexers can only agree on whether they are set.
 */
const WALL_CLOCK: Record<string, (r: Row) => string[]> = {
  notification: (r) => (r.reason === 'unverified' ? ['sortAt'] : []),
  op_thread_reply: () => ['deletedAt'],
  profile: (r) => (r.createdAtFromClock ? ['createdAt'] : []),
}

const selectAll = (schema: string, table: string): string =>
  table === 'profile'
    ? `select t.*, (r.json::jsonb -> 'createdAt') is null as "createdAtFromClock"
       from "${schema}".profile t left join "${schema}".record r on r.uri = t.uri`
    : table === 'record'
      ? // site.standard.* records: kept by openplane, not by the stock (a documented departure).
        `select * from "${schema}".record where uri not like 'at://%/site.standard.%'`
      : `select * from "${schema}"."${table}"`

/** Columns one comparison sets aside (e.g. the time each side indexed at), per table. */
export type Unequal = (table: string, row: Row) => string[]

function normalizeRow(table: string, r: Row, unequal?: Unequal): string {
  for (const col of IGNORED[table] ?? []) delete r[col]
  for (const col of unequal?.(table, r) ?? []) if (col in r) r[col] = '<set aside>'
  for (const col of WALL_CLOCK[table]?.(r) ?? []) r[col] = r[col] === null ? null : '<clock>'
  delete r.createdAtFromClock
  return JSON.stringify(r)
}

export interface TableDiff {
  table: string
  /** Rows only in the stock schema / only in ours, sorted. */
  onlyStock: string[]
  onlyOurs: string[]
}

/**
 * Rows of each table in both schemas, normalized to JSON lines, compared as multisets; the
 * tables that differ, with the rows only one side has. `stock` is the stock indexer's schema:
 * its counters are recounted from its rows before they are compared with ours as stored.
 */
export async function tableDiffs(
  stock: string,
  ours: string,
  tables: string[],
  unequal?: Unequal,
): Promise<TableDiff[]> {
  const client = new pg.Client({ connectionString: PG_URL })
  await client.connect()
  try {
    const diffs: TableDiff[] = []
    for (const table of tables) {
      const dump = async (schema: string) => {
        if (table === 'post_agg' || table === 'profile_agg') {
          return aggRows(client, schema, table, schema === stock ? 'recounted' : 'stored')
        }
        const { rows } = await client.query(selectAll(schema, table))
        return rows.map((r: Row) => normalizeRow(table, r, unequal))
      }
      const counts = new Map<string, number>()
      for (const r of await dump(stock)) counts.set(r, (counts.get(r) ?? 0) + 1)
      const onlyOurs: string[] = []
      for (const r of await dump(ours)) {
        const n = counts.get(r) ?? 0
        if (n === 0) onlyOurs.push(r)
        else if (n === 1) counts.delete(r)
        else counts.set(r, n - 1)
      }
      const onlyStock = [...counts].flatMap(([r, n]) => Array<string>(n).fill(r))
      if (onlyStock.length || onlyOurs.length) {
        diffs.push({ table, onlyStock: onlyStock.sort(), onlyOurs: onlyOurs.sort() })
      }
    }
    return diffs
  } finally {
    await client.end()
  }
}

/** A readable summary of one table's difference (first rows of each side). */
export function formatTableDiff(d: TableDiff, stock: string, ours: string, rows = 5): string {
  return (
    `${d.table}: ${d.onlyStock.length} rows only in ${stock}, ${d.onlyOurs.length} only in ${ours}\n` +
    d.onlyStock
      .slice(0, rows)
      .map((r) => `  - ${r}`)
      .join('\n') +
    '\n' +
    d.onlyOurs
      .slice(0, rows)
      .map((r) => `  + ${r}`)
      .join('\n')
  )
}

/** tableDiffs as readable text, one entry per table that differs (empty when all are equal). */
export async function diffSchemas(
  stock: string,
  ours: string,
  tables: string[],
  unequal?: Unequal,
): Promise<string[]> {
  return (await tableDiffs(stock, ours, tables, unequal)).map((d) =>
    formatTableDiff(d, stock, ours),
  )
}

/** Every table the indexer writes. */
export const INDEXED_TABLES = [
  'record',
  'duplicate_record',
  'actor',
  'actor_sync',
  'profile',
  'profile_agg',
  'post',
  'post_agg',
  'post_embed_image',
  'post_embed_gallery_image',
  'post_embed_video',
  'post_embed_external',
  'post_embed_record',
  'quote',
  'feed_item',
  'op_thread_reply',
  'like',
  'repost',
  'follow',
  'actor_block',
  'list',
  'list_item',
  'list_block',
  'reference_list_opt_out',
  'thread_gate',
  'post_gate',
  'feed_generator',
  'labeler',
  'starter_pack',
  'verification',
  'notification',
]

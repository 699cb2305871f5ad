// `openplane backfill`: asks for repos to be fetched (from a relay's or PDS's listing, the repos
// holding a collection, or a DID list), then fetches and indexes them with a progress bar, or,
// when `openplane start` holds the writer, leaves them to its backfill worker and follows the
// progress from the state table. In a community deployment it asks for the community's accounts,
// and fetches no one else.
import { parseArgs } from 'node:util'
import cliProgress from 'cli-progress'
import {
  Backfill,
  BACKFILL_DEFAULTS,
  listRepos,
  listReposByCollection,
  readDidList,
  RepoTable,
  type BackfillStats,
  type RepoCounts,
} from '@openplane/backfill'
import { Community } from '@openplane/community'
import type { Db } from '@openplane/db'
import { IdentityPrefetch, lookupThread, Writer } from '@openplane/ingest'
import { logger } from '@openplane/telemetry'
import { retryPolicy, type Config } from './config.ts'
import { openDatabase } from './database.ts'
import { takeWriterLock } from './writer-lock.ts'

export const BACKFILL_USAGE = `usage: openplane backfill [options]
  --from <url>          list repos from this relay or PDS (com.atproto.sync.listRepos)
  --collection <nsid>   with --from: only repos holding this collection (listReposByCollection)
  --dids <file>         repos from a file of DIDs, one per line
  --retry-failed        fetch again the repos an earlier run could not
  --enqueue-only        ask for the repos and exit (a running \`openplane start\` fetches them)
  --status              print the state of the backfill and exit
Repos already done are not fetched again. With DATAPLANE_COMMUNITY_* set, the community's accounts
are asked for, and repos outside it are not fetched. Settings from env: DATAPLANE_BACKFILL_CONCURRENCY,
DATAPLANE_BACKFILL_PER_HOST, DATAPLANE_BACKFILL_MEMORY_MB, DATAPLANE_VERIFY_COMMITS, DB_POSTGRES_*.`

export async function backfillCommand(config: Config, argv: string[]): Promise<number> {
  const { values } = parseOptions(argv)
  if (values.collection && !values.from) throw new UsageError('--collection needs --from')
  const dids = values.dids ? await readDids(values.dids) : []
  const db = await openDatabase(config)
  try {
    const repos = new RepoTable(db.db)
    const community = config.community
      ? await Community.open(db.db, config.community, true)
      : undefined
    let asked = 0
    if (values.from) asked += await enqueueListed(repos, values.from, values.collection)
    if (values.dids) asked += await repos.enqueue(dids)
    if (values.from || values.dids) logger.info({ new: asked }, 'repos asked for')
    if (values.status || values['enqueue-only']) {
      printStatus(await repos.counts(), await repos.failures())
      return 0
    }
    const lock = await takeWriterLock(db, { wait: false, embedded: !config.postgres })
    if (!lock) {
      logger.info('a running `openplane start` writes this database: its worker fetches the repos')
      await follow(repos)
      return 0
    }
    try {
      const stats = await run(config, db, values['retry-failed'], community)
      printStatus(await repos.counts(), await repos.failures())
      return stats.failed ? 1 : 0
    } finally {
      await lock.release()
    }
  } finally {
    await db.close()
  }
}

export class UsageError extends Error {}

function parseOptions(argv: string[]) {
  try {
    return parseArgs({
      args: argv,
      options: {
        from: { type: 'string' },
        collection: { type: 'string' },
        dids: { type: 'string' },
        'retry-failed': { type: 'boolean', default: false },
        'enqueue-only': { type: 'boolean', default: false },
        status: { type: 'boolean', default: false },
      },
      strict: true,
    })
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err))
  }
}

async function readDids(file: string): Promise<string[]> {
  try {
    return await readDidList(file)
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err))
  }
}

async function enqueueListed(repos: RepoTable, from: string, collection?: string) {
  const listed = collection ? listReposByCollection(from, collection) : listRepos(from)
  let page: string[] = []
  let added = 0
  let inactive = 0
  for await (const r of listed) {
    if (!r.active) {
      inactive++
      continue
    }
    page.push(r.did)
    if (page.length >= 10_000) {
      added += await repos.enqueue(page)
      page = []
    }
  }
  added += await repos.enqueue(page)
  if (inactive) logger.info({ inactive }, 'inactive repos listed and left out')
  return added
}

async function run(
  config: Config,
  db: Db,
  retryFailed: boolean,
  community: Community | undefined,
): Promise<BackfillStats> {
  const identityOptions = {
    plcUrl: config.plcUrl,
    allowPrivateNetwork: config.allowPrivateNetwork,
    testHandles: config.testHandles,
  }
  // Handles and account hosting are looked up on their own thread, off the writer's.
  const deps = lookupThread({ identity: identityOptions })
  const writer = new Writer(db.db, deps, {
    scope: community,
    transactions: db.transactions,
    keptRows: config.keptPosts,
    keptRepos: config.keptRepos,
  })
  const prefetch = new IdentityPrefetch(db.db, deps)
  // Live events a crashed server left held come before any CAR written here.
  await writer.recoverHeld()
  // Members' lists and follows, as they are written, bring more accounts to fetch.
  if (community) writer.onCommitted(community.onCommitted)
  const backfill = new Backfill({
    ...BACKFILL_DEFAULTS,
    db: db.db,
    writer,
    didDocs: deps,
    verify: config.verifyCommits,
    concurrency: Math.max(1, config.backfill.concurrency),
    perHost: config.backfill.perHost,
    memoryBytes: config.backfill.memoryBytes,
    workers: config.decodeWorkers,
    retry: retryPolicy(config),
    retryFailed,
    scope: community,
    prefetch,
  })
  const stop = () => {
    logger.info('stopping: repos in flight are finished first')
    backfill.stop()
  }
  process.once('SIGINT', stop)
  process.once('SIGTERM', stop)
  const total = await backfill.repos.counts()
  const progress = showProgress(
    total.pending + (retryFailed ? total.failed : 0),
    () => backfill.stats,
  )
  try {
    return await backfill.run({ drain: true })
  } finally {
    await backfill.close()
    prefetch.stop()
    await deps.stop()
    progress.stop()
    process.off('SIGINT', stop)
    process.off('SIGTERM', stop)
  }
}

/** A bar on a terminal; a log line every 10 s otherwise (logs, CI, containers). */
function showProgress(total: number, stats: () => BackfillStats): { stop(): void } {
  const rate = (s: BackfillStats) => {
    const seconds = Math.max(0.001, (Date.now() - s.startedAt) / 1000)
    return { reposPerSec: (s.done + s.failed) / seconds, recordsPerSec: s.records / seconds }
  }
  if (!process.stderr.isTTY) {
    const timer = setInterval(() => {
      const s = stats()
      const r = rate(s)
      logger.info(
        {
          done: s.done,
          failed: s.failed,
          total,
          records: s.records,
          recordsPerSec: Math.round(r.recordsPerSec),
          errors: s.errors,
        },
        'backfill progress',
      )
    }, 10_000)
    return { stop: () => clearInterval(timer) }
  }
  const bar = new cliProgress.SingleBar(
    {
      format:
        'backfill [{bar}] {value}/{total} repos | {records} records, {rate} rec/s | {failed} failed, {errors} errors | ETA {eta_formatted}',
      stream: process.stderr,
      hideCursor: true,
    },
    cliProgress.Presets.shades_classic,
  )
  bar.start(total, 0, { records: 0, rate: 0, failed: 0, errors: 0 })
  const timer = setInterval(() => {
    const s = stats()
    bar.update(s.done + s.failed, {
      records: s.records,
      rate: Math.round(rate(s).recordsPerSec),
      failed: s.failed,
      errors: s.errors,
    })
  }, 500)
  return {
    stop() {
      clearInterval(timer)
      const s = stats()
      bar.update(s.done + s.failed, { records: s.records, failed: s.failed, errors: s.errors })
      bar.stop()
    },
  }
}

/** Another process backfills: report the state table's progress until nothing is pending. */
async function follow(repos: RepoTable): Promise<void> {
  for (;;) {
    const c = await repos.counts()
    logger.info(c, 'backfill state')
    if (c.pending === 0) return
    await new Promise((r) => setTimeout(r, 10_000))
  }
}

function printStatus(c: RepoCounts, failures: { reason: string; repos: number }[]) {
  const purge = c.purge ? `, ${c.purge} to purge` : ''
  console.log(`repos: ${c.done} done, ${c.pending} pending, ${c.failed} failed${purge}`)
  for (const f of failures) console.log(`  ${f.repos} failed: ${f.reason}`)
}

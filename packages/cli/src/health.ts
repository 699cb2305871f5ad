// What /_ready and /_health report: whether this process can serve (Postgres answers on the
// reads' pool), and beside it every dependency's state, last error and lag, so dashboards, alerts
// and people can tell which one is in trouble. Only Postgres decides readiness: the timeline store
// has Postgres to fall back to, and a source or consumer that is away delays data, it does not
// stop reads; taking the process out of rotation for those would turn a delay into an outage.
import { sql } from 'kysely'
import type { Db } from '@openplane/db'
import type { GapRepair, RepoTable } from '@openplane/backfill'
import type { BsyncConsumer } from '@openplane/bsync'
import type { GraphFollower, HomeTimelines } from '@openplane/fanout'
import type { Indexer } from '@openplane/ingest'
import type { LabelConsumer } from '@openplane/labels'
import type { Community } from '@openplane/community'
import type { HealthReport } from '@openplane/server'

export interface HealthParts {
  reads: Db
  home?: HomeTimelines
  /** A server without the indexer: its graph's feed. */
  graphFeed?: GraphFollower
  indexers: Indexer[]
  community?: Community
  bsync?: BsyncConsumer
  labels?: LabelConsumer
  /** The indexer's repo state: repos out of sync (their fetch failing) are reported. */
  repos?: RepoTable
  /** Repairs of gaps the sources left (repos listed and fetched again). */
  gapRepair?: GapRepair
}

/** How long the out-of-sync count is reused between probes (it counts rows). */
const REPOS_EVERY_MS = 10_000
let reposRead: { at: number; value: Promise<OutOfSync> } | undefined
interface OutOfSync {
  repos: number
  oldest: string | null
}

function outOfSync(repos: RepoTable): Promise<OutOfSync> {
  if (reposRead && Date.now() - reposRead.at < REPOS_EVERY_MS) return reposRead.value
  const value = repos.outOfSync().then(
    (r) => ({ repos: r.repos, oldest: r.oldest?.toISOString() ?? null }),
    () => ({ repos: -1, oldest: null }),
  )
  reposRead = { at: Date.now(), value }
  return value
}

export async function healthReport(parts: HealthParts): Promise<HealthReport> {
  const postgres = await sql`select 1`.execute(parts.reads.db).then(
    () => ({ ok: true as const }),
    (err: unknown) => ({
      ok: false as const,
      error: err instanceof Error ? err.message : String(err),
    }),
  )
  const sources = parts.indexers.map((i) => {
    const s = i.state()
    return { ok: s.connected, ...s }
  })
  const bsync = parts.bsync && Object.entries(parts.bsync.state())
  const labelers = parts.labels?.state()
  const repos = parts.repos && (await outOfSync(parts.repos))
  return {
    ready: postgres.ok,
    dependencies: {
      postgres,
      ...(parts.home ? { timelineStore: parts.home.status() } : {}),
      ...(parts.graphFeed ? { graphFeed: parts.graphFeed.status() } : {}),
      ...(sources.length ? { sources } : {}),
      ...(bsync
        ? {
            bsync: Object.fromEntries(
              bsync.map(([name, s]) => [name, { ok: s.connected && !s.lastError, ...s }]),
            ),
          }
        : {}),
      ...(labelers
        ? { labelers: labelers.map((s) => ({ ok: s.connected && !s.lastError, ...s })) }
        : {}),
    },
    ...(parts.community ? { community: { accounts: parts.community.size() } } : {}),
    ...(repos ? { outOfSync: repos } : {}),
    ...(parts.gapRepair ? { gapRepair: parts.gapRepair.state() } : {}),
  }
}

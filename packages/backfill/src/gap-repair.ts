// A gap a source left (a cursor older than the relay's replay window: the relay said
// OutdatedCursor and went on from the oldest event it keeps; Jetstream resumed later than
// asked) holds events no live stream will bring again. The repos they changed are found in the
// host's listing (com.atproto.sync.listRepos gives each repo's current rev) and fetched again
// through the backfill, live events gated as for any fetch, which reconciles each to its CAR.
//
// A repo is taken when its listed rev was made after the gap began (a rev is a TID: its
// timestamp, less a margin for clocks), or is newer than the rev indexed for it. A repo that
// changed in the gap and again after it, whose live commit already moved the indexed rev, is
// taken by the first rule; on a firehose its broken `since` chain asks for it too.
import { TID } from '@atproto/common-web'
import { isValidTid } from '@atproto/syntax'
import type { Kysely } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'
import type { Scope } from '@openplane/ingest'
import { childLogger, counter } from '@openplane/telemetry'
import { listRepos, type ListedRepo } from './enumerate.ts'
import type { RepoTable } from './repos.ts'

const log = childLogger('gap-repair')
const gapRepos = counter(
  'openplane_gap_repos_total',
  'Repos listed while repairing a gap a source left, by outcome',
  ['outcome'],
)

/** Clocks of PDSes (which make revs) and relays (which time events) differ by this much at most. */
export const GAP_CLOCK_MARGIN_MS = 10 * 60_000

export interface GapRepairOptions {
  db: Kysely<DatabaseSchema>
  repos: Pick<RepoTable, 'enqueue'>
  /** The accounts indexed, in a community deployment. */
  scope?: Scope
  /** The listing, by host (default: listRepos). */
  list?: (host: string) => AsyncIterable<ListedRepo>
  /** How far PDS and relay clocks may differ (default GAP_CLOCK_MARGIN_MS). */
  clockMarginMs?: number
}

export interface GapToRepair {
  /** The host to list repos from (https://…). */
  host: string
  /** Stream time of the last event read before the gap; undefined: every listed repo changed. */
  after: string | undefined
}

export interface GapRepairState {
  /** Listings in progress or waiting. */
  running: number
  /** The last listing that finished: when, and how many repos it asked for. */
  last: { host: string; at: string; listed: number; refetched: number } | undefined
  /** The last listing that failed, and why. */
  failed: { host: string; at: string; error: string } | undefined
}

export class GapRepair {
  private readonly opts: GapRepairOptions
  private chain: Promise<void> = Promise.resolve()
  private readonly current: GapRepairState = { running: 0, last: undefined, failed: undefined }

  constructor(opts: GapRepairOptions) {
    this.opts = opts
  }

  state(): GapRepairState {
    return { ...this.current }
  }

  /** Lists the host and asks for the repos changed since the gap began (one listing at a time). */
  repair(gap: GapToRepair): Promise<void> {
    this.current.running++
    const run = this.chain.then(() => this.listAndEnqueue(gap))
    this.chain = run.then(
      () => {
        this.current.running--
      },
      (err: unknown) => {
        this.current.running--
        const error = err instanceof Error ? err.message : String(err)
        this.current.failed = { host: gap.host, at: new Date().toISOString(), error }
        log.error({ host: gap.host, err: error }, 'gap repair: listing failed; repos not refetched')
      },
    )
    return this.chain
  }

  private async listAndEnqueue(gap: GapToRepair): Promise<void> {
    const margin = this.opts.clockMarginMs ?? GAP_CLOCK_MARGIN_MS
    const since = gap.after ? Date.parse(gap.after) - margin : -Infinity
    const list = this.opts.list ?? listRepos
    let listed = 0
    let refetched = 0
    let page: ListedRepo[] = []
    const flush = async () => {
      const wanted = await this.changed(page, since)
      page = []
      if (!wanted.length) return
      refetched += await this.opts.repos.enqueue(wanted, { refetch: true, keepBackoff: true })
    }
    log.info(
      { host: gap.host, after: gap.after },
      'gap repair: listing repos changed since the gap',
    )
    for await (const repo of list(gap.host)) {
      listed++
      page.push(repo)
      if (page.length >= 1000) await flush()
    }
    await flush()
    this.current.last = { host: gap.host, at: new Date().toISOString(), listed, refetched }
    log.info({ host: gap.host, listed, refetched }, 'gap repair: repos asked for')
  }

  /** The page's repos to fetch again: changed since `since` (ms) or ahead of what is indexed. */
  private async changed(page: ListedRepo[], since: number): Promise<string[]> {
    const scope = this.opts.scope
    const candidates = page.filter((r) => r.active && (!scope || scope.has(r.did)))
    gapRepos.inc({ outcome: 'inactive_or_outside' }, page.length - candidates.length)
    if (!candidates.length) return []
    const rows = await this.opts.db
      .selectFrom('actor_sync')
      .select(['did', 'repoRev'])
      .where(
        'did',
        'in',
        candidates.map((r) => r.did),
      )
      .execute()
    const indexed = new Map(rows.map((r) => [r.did, r.repoRev]))
    const wanted: string[] = []
    for (const r of candidates) {
      const rev = indexed.get(r.did)
      const made = r.rev === undefined ? undefined : tidTime(r.rev)
      // No rev listed, or one that is not a TID: whether it changed cannot be told, so it did.
      const recent = made === undefined || made >= since
      const ahead = r.rev !== undefined && rev != null && r.rev > rev
      if (recent || ahead) wanted.push(r.did)
    }
    gapRepos.inc({ outcome: 'refetch' }, wanted.length)
    gapRepos.inc({ outcome: 'unchanged' }, candidates.length - wanted.length)
    return wanted
  }
}

/** Milliseconds since the epoch a TID (a rev) was made at, or undefined if it is not a TID. */
export function tidTime(tid: string): number | undefined {
  return isValidTid(tid) ? TID.fromStr(tid).timestamp() / 1000 : undefined
}

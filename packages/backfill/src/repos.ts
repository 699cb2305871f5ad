// The per-repo backfill state (openplane_repo): which repos are to be fetched, which are done and
// at what rev, which failed and why. A repo is marked done in the transaction that writes its last
// records (markDone), so a killed backfill resumes with exactly the repos not written. A failed
// repo is out of sync with its PDS: it is fetched again at `retryAt`, later after each failure in
// a row (markFailed), until a fetch succeeds.
import { sql, type Kysely } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'

/** Repos enqueued at once after which the table's statistics are refreshed. */
const ANALYZE_AFTER = 1000

type Db = Kysely<DatabaseSchema>

/** Where a page of repos to fetch ends (request time, then DID). */
export interface RepoKey {
  at: string
  did: string
}

export interface RepoCounts {
  pending: number
  done: number
  failed: number
  /** Accounts that left a community, their index still to be removed. */
  purge: number
}

export class RepoTable {
  private readonly db: Db

  constructor(db: Db) {
    this.db = db
  }

  /**
   * Asks for these repos to be fetched. Repos already known keep their state, unless `refetch`
   * (a #sync, a broken chain, a new community member): then they are fetched again. A repo
   * failing to fetch keeps its schedule if `keepBackoff` (it is out of sync already, and asking
   * its PDS sooner would not help).
   */
  async enqueue(
    dids: string[],
    opts: { refetch?: boolean; keepBackoff?: boolean } = {},
  ): Promise<number> {
    if (!dids.length) return 0
    // One array parameter, however many DIDs (a statement binds at most 65,535 values).
    const list = [...new Set(dids)]
    const conflict = opts.refetch
      ? sql`do update set state = 'pending', reason = null, "updatedAt" = now() ${
          opts.keepBackoff ? sql`where openplane_repo.state <> 'failed'` : sql``
        }`
      : sql`do nothing`
    let added = 0
    for (let i = 0; i < list.length; i += 50_000) {
      const res = await sql`
        insert into openplane_repo (did)
        select unnest(${list.slice(i, i + 50_000)}::text[])
        on conflict (did) ${conflict}`.execute(this.db)
      added += Number(res.numAffectedRows ?? 0)
    }
    // A large enqueue changes the table faster than autovacuum re-reads its statistics: with the
    // old ones (a near-empty table) the planner pages by sorting every pending repo, 40–60 ms a
    // page at 90,000 repos, where the index in order answers in 0.2 ms.
    if (added >= ANALYZE_AFTER) await sql`analyze openplane_repo`.execute(this.db)
    return added
  }

  /**
   * Repos to fetch in request order, after `after` (a key from an earlier page), failed ones too
   * if asked; a page shorter than `limit` is the end.
   */
  async page(
    limit: number,
    after: RepoKey | undefined,
    retryFailed: boolean,
  ): Promise<{ did: string; key: RepoKey }[]> {
    const rows = await this.db
      .selectFrom('openplane_repo')
      // As text: a Date would drop the microseconds the next page starts after.
      .select(['did', sql<string>`"enqueuedAt"::text`.as('at')])
      .where('state', 'in', retryFailed ? ['pending', 'failed'] : ['pending'])
      .$if(after !== undefined, (q) =>
        q.where(sql<boolean>`("enqueuedAt", did) > (${after!.at}::timestamptz, ${after!.did})`),
      )
      .orderBy('enqueuedAt')
      .orderBy('did')
      .limit(limit)
      .execute()
    return rows.map((r) => ({ did: r.did, key: { at: r.at, did: r.did } }))
  }

  /**
   * Asks for these accounts' index to be removed (they left the community), by whichever process
   * holds the writer. Returns how many were asked for.
   */
  async enqueuePurge(dids: string[]): Promise<number> {
    let added = 0
    const list = [...new Set(dids)]
    for (let i = 0; i < list.length; i += 50_000) {
      const res = await sql`
        insert into openplane_repo (did, state)
        select unnest(${list.slice(i, i + 50_000)}::text[]), 'purge'
        on conflict (did) do update set state = 'purge', reason = null, "updatedAt" = now()`.execute(
        this.db,
      )
      added += Number(res.numAffectedRows ?? 0)
    }
    // A large enqueue changes the table faster than autovacuum re-reads its statistics: with the
    // old ones (a near-empty table) the planner pages by sorting every pending repo, 40–60 ms a
    // page at 90,000 repos, where the index in order answers in 0.2 ms.
    if (added >= ANALYZE_AFTER) await sql`analyze openplane_repo`.execute(this.db)
    return added
  }

  /** Accounts queued for purging, oldest first. */
  async toPurge(limit: number): Promise<string[]> {
    const rows = await this.db
      .selectFrom('openplane_repo')
      .select('did')
      .where('state', '=', 'purge')
      .orderBy('enqueuedAt')
      .limit(limit)
      .execute()
    return rows.map((r) => r.did)
  }

  /** Drops requests for repos not to be fetched after all (outside the community). */
  async forget(dids: string[]): Promise<void> {
    if (!dids.length) return
    await this.db
      .deleteFrom('openplane_repo')
      .where('did', 'in', dids)
      .where('state', 'in', ['pending', 'failed'])
      .execute()
  }

  /**
   * Failed repos due to be fetched again, soonest first, up to `limit`; `busy` ones are passed
   * over (they are being fetched).
   */
  async due(limit: number, busy: { size: number; has(did: string): boolean }): Promise<string[]> {
    if (limit <= 0) return []
    const rows = await this.db
      .selectFrom('openplane_repo')
      .select('did')
      .where('state', '=', 'failed')
      .where((eb) => eb.or([eb('retryAt', 'is', null), eb('retryAt', '<=', sql<Date>`now()`)]))
      .orderBy(sql`"retryAt" nulls first`)
      .orderBy('did')
      .limit(limit + busy.size)
      .execute()
    return rows
      .map((r) => r.did)
      .filter((did) => !busy.has(did))
      .slice(0, limit)
  }

  /** How many repos are out of sync (failing to fetch), and since when the oldest has been. */
  async outOfSync(): Promise<{ repos: number; oldest: Date | null }> {
    const row = await this.db
      .selectFrom('openplane_repo')
      .select([sql<string>`count(*)`.as('n'), sql<Date | null>`min("failedSince")`.as('oldest')])
      .where('state', '=', 'failed')
      .executeTakeFirst()
    return { repos: Number(row?.n ?? 0), oldest: row?.oldest ?? null }
  }

  async counts(): Promise<RepoCounts> {
    const rows = await this.db
      .selectFrom('openplane_repo')
      .select(['state', sql<string>`count(*)`.as('n')])
      .groupBy('state')
      .execute()
    const counts: RepoCounts = { pending: 0, done: 0, failed: 0, purge: 0 }
    for (const r of rows) counts[r.state] = Number(r.n)
    return counts
  }

  /** Why repos failed, most common first. */
  async failures(limit = 10): Promise<{ reason: string; repos: number }[]> {
    const rows = await this.db
      .selectFrom('openplane_repo')
      .select(['reason', sql<string>`count(*)`.as('n')])
      .where('state', '=', 'failed')
      .groupBy('reason')
      .orderBy(sql`count(*)`, 'desc')
      .limit(limit)
      .execute()
    return rows.map((r) => ({ reason: r.reason ?? '', repos: Number(r.n) }))
  }
}

/** A repo written whole: the rev it was fetched at, from where, how many records. */
export interface DoneRepo {
  did: string
  rev: string
  host: string
  records: number
}

/** When a failing repo is fetched again: `baseMs` after the first failure, doubling to `maxMs`. */
export interface RetryPolicy {
  baseMs: number
  maxMs: number
}

/**
 * Marks a repo failed with the reason, and when to fetch it again (a quarter either way of the
 * backoff, so repos that failed together are not asked for together).
 */
export async function markFailed(
  db: Db,
  did: string,
  failure: { reason: string; host: string | undefined },
  retry: RetryPolicy,
): Promise<void> {
  const backoff = sql`least(${retry.maxMs}::float8, ${retry.baseMs}::float8 * power(2, least(failures, 30)))`
  await db
    .updateTable('openplane_repo')
    .set({
      state: 'failed',
      reason: failure.reason.slice(0, 500),
      host: failure.host ?? null,
      attempts: sql`attempts + 1`,
      failures: sql`failures + 1`,
      failedSince: sql`coalesce("failedSince", now())`,
      retryAt: sql`now() + ${backoff} * (0.75 + random() / 2) * interval '1 millisecond'`,
      updatedAt: sql`now()`,
    })
    .where('did', '=', did)
    .execute()
}

/** Marks repos done, inside the transaction that writes their last records: one statement. */
export async function markDone(tx: Db, repos: DoneRepo[]): Promise<void> {
  if (!repos.length) return
  // One row per repo: a repo twice in one upsert would make Postgres refuse the transaction.
  const last = new Map(repos.map((r) => [r.did, r]))
  await tx
    .insertInto('openplane_repo')
    .values([...last.values()].map((r) => ({ ...r, state: 'done' as const, attempts: 1 })))
    .onConflict((oc) =>
      oc.column('did').doUpdateSet({
        state: 'done',
        rev: sql.ref('excluded.rev'),
        host: sql.ref('excluded.host'),
        records: sql.ref('excluded.records'),
        reason: null,
        attempts: sql`openplane_repo.attempts + 1`,
        failures: 0,
        failedSince: null,
        retryAt: null,
        updatedAt: sql`now()`,
      }),
    )
    .execute()
}

/**
 * Forgets purged accounts, inside the transaction that removes their index; one asked for again
 * meanwhile (back in the community: pending) keeps its row.
 */
export async function markPurged(tx: Db, dids: string[]): Promise<void> {
  await tx
    .deleteFrom('openplane_repo')
    .where('did', 'in', dids)
    .where('state', '=', 'purge')
    .execute()
}

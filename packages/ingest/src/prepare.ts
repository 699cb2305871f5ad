// The network work for a batch, done before its transaction opens: which handles to write (in
// rounds, as each check decides whether the next event of that actor checks again), which account
// deletions are real (the PDS no longer hosts the repo), and which repos the batch shows out of
// sync (chain.ts). `below`: the actors and revs as the batch written before this one leaves them,
// if it may not be committed yet (a batch planned ahead).
import { sql, type Kysely } from 'kysely'
import { eachValue, type DatabaseSchema } from '@openplane/db'
import { needsHandleReindex, readActors } from './actors.ts'
import type { Prepared } from './batch/steps.ts'
import { absentCreates } from './absent-creates.ts'
import { brokenChains } from './chain.ts'
import type { ActorState, CommittedRepos } from './committed-repos.ts'
import type { IngestEvent } from './events.ts'
import type { WriterDeps } from './deps.ts'

type Db = Kysely<DatabaseSchema>

/**
 * Network work for the batch, done before the transaction: handles and account deletions.
 * `below`: actor rows as the batch written before this one leaves them, if it may not be
 * committed yet.
 */
export async function prepareBatch(
  db: Db,
  deps: WriterDeps,
  batch: IngestEvent[],
  below?: Pick<Prepared, 'actors' | 'claimed' | 'revs'>,
  repos?: CommittedRepos,
): Promise<Prepared> {
  const relevant = (e: IngestEvent) =>
    e.type !== 'skip' && !(e.type === 'commit' && e.ops.length === 0)
  const seen = new Set<string>()
  for (const e of batch) if (relevant(e)) seen.add(e.did)
  const dids = [...seen]
  const actors = await actorsOf(db, dids, repos)
  for (const did of dids) {
    const after = below?.actors.get(did)
    if (after === null) actors.delete(did)
    else if (after) actors.set(did, after)
    // A handle the batch below gave to another actor is no longer this one's.
    const read = actors.get(did)
    const holder = read?.handle != null ? below?.claimed.get(read.handle) : undefined
    if (read && after === undefined && holder !== undefined && holder !== did) {
      actors.set(did, { ...read, handle: null })
    }
  }
  // An account event says "deleted"; it is applied only if the PDS no longer has the repo. A
  // purge needs no asking.
  const deletions = new Set<number>()
  const asked: Promise<void>[] = []
  for (let index = 0; index < batch.length; index++) {
    const evt = batch[index]!
    if (evt.type === 'purge') deletions.add(index)
    else if (evt.type === 'account' && !evt.active && evt.status === 'deleted') {
      asked.push(
        deps.isHosted(evt.did).then(
          (hosted) => void (hosted || deletions.add(index)),
          () => undefined,
        ),
      )
    }
  }
  await Promise.all(asked)
  // Which events re-check a handle depends on the outcome of earlier checks (an invalid handle
  // is re-checked hourly, a valid one daily), so plan in rounds: each round resolves, all at
  // once, the first unresolved check of each actor, until the plan needs no more.
  const outcomes = new Map<number, string | null | undefined>()
  const handles = new Map<number, { did: string; handle: string | null }>()
  let plan: ActorPlan
  for (;;) {
    handles.clear()
    plan = new ActorPlan(actors)
    const blocked = new Set<string>()
    const wanted: { index: number; did: string; force: boolean }[] = []
    for (let index = 0; index < batch.length; index++) {
      const evt = batch[index]!
      if (deletions.has(index)) plan.remove(evt.did)
      if (!relevant(evt) || evt.type === 'account' || evt.type === 'purge') continue
      if (blocked.has(evt.did)) continue
      if (evt.type !== 'identity' && !needsHandleReindex(plan.get(evt.did), evt.time)) continue
      if (!outcomes.has(index)) {
        wanted.push({ index, did: evt.did, force: evt.type === 'identity' })
        blocked.add(evt.did)
        continue
      }
      const handle = outcomes.get(index)
      // An unresolvable actor is left as it is, as the stock's failed lookup leaves it.
      if (handle === undefined) continue
      handles.set(index, { did: evt.did, handle })
      plan.set(evt.did, { handle, indexedAt: evt.time })
    }
    if (!wanted.length) break
    await Promise.all(
      wanted.map(async ({ index, did, force }) => {
        outcomes.set(index, await deps.resolveHandle(did, force).catch(() => undefined))
      }),
    )
  }
  const claimed = new Map<string, string>()
  for (const { did, handle } of handles.values()) if (handle !== null) claimed.set(handle, did)
  const indexed = await indexedRevs(db, batch, below, repos)
  const { repos: outOfSync, revs, chained } = brokenChains(batch, indexed.revs)
  const untrusted = new Set([...outOfSync, ...indexed.failed])
  const absent = absentCreates(batch, chained, untrusted)
  return { handles, deletions, actors: plan.snapshot(), claimed, revs, outOfSync, absent }
}

/**
 * The actor rows (handle, check time) of `dids` that have one: kept ones from `repos`, the rest
 * read (and kept).
 */
async function actorsOf(
  db: Db,
  dids: string[],
  repos: CommittedRepos | undefined,
): Promise<Map<string, ActorState>> {
  const actors = new Map<string, ActorState>()
  const unknown: string[] = []
  for (const did of dids) {
    const kept = repos?.actor(did)
    if (kept === undefined) unknown.push(did)
    else if (kept !== null) actors.set(did, kept)
  }
  if (!unknown.length) return actors
  const version = repos?.version ?? 0
  const read = new Map<string, ActorState>()
  for (const a of await readActors(db, unknown)) {
    read.set(a.did, { handle: a.handle, indexedAt: a.indexedAt })
  }
  repos?.learn(version, { actors: { dids: unknown, rows: read } })
  for (const [did, a] of read) actors.set(did, a)
  return actors
}

/**
 * The rev indexed for each repo with a commit or #sync in the batch (or left by `below`), and
 * which of them failed their last fetch.
 */
async function indexedRevs(
  db: Db,
  batch: IngestEvent[],
  below?: Pick<Prepared, 'revs'>,
  repos?: CommittedRepos,
): Promise<{ revs: Map<string, string | null>; failed: Set<string> }> {
  // A repo's first commit (since null) is asked for too: it follows the index only where the
  // index holds nothing of the repo (chain.ts).
  const chained = (e: IngestEvent) =>
    e.type === 'sync' || (e.type === 'commit' && e.since !== undefined)
  const dids = [...new Set(batch.filter(chained).map((e) => e.did))]
  const revs = new Map<string, string | null>()
  const failed = new Set<string>()
  if (!dids.length) return { revs, failed }
  const unknown: string[] = []
  for (const did of dids) {
    const kept = repos?.sync(did)
    if (kept === undefined) unknown.push(did)
    else if (kept !== null) revs.set(did, kept.rev)
  }
  // Probed repo by repo (eachValue): as a join on `did = any($1)`, Postgres scanned both
  // tables whole for each batch (20 ms a batch at 90,000 repos). Whether a fetch failed is
  // the backfill's to say (it marks repos outside the writer): asked of every repo.
  const version = repos?.version ?? 0
  const revProbe = sql`select did, "repoRev" from actor_sync where did = u.v`
  const failedProbe = sql`select did from openplane_repo where did = u.v and state = 'failed'`
  const { rows } = await sql<{ failed: boolean; did: string; repoRev: string | null }>`
    select false as failed, s.did, s."repoRev" from ${eachValue(unknown, revProbe, 's')}
    union all
    select true, r.did, null from ${eachValue(dids, failedProbe, 'r')}
  `.execute(db)
  const read = new Map<string, string | null>()
  for (const r of rows) {
    if (r.failed) failed.add(r.did)
    else read.set(r.did, r.repoRev)
  }
  repos?.learn(version, { syncs: { dids: unknown, rows: read } })
  for (const [did, rev] of read) revs.set(did, rev)
  for (const did of dids) {
    const after = below?.revs.get(did)
    if (after !== undefined) revs.set(did, after)
  }
  return { revs, failed }
}

/**
 * Actor rows as the batch will have changed them, for planning handle checks: what setHandle and
 * deleteAccount will do, without writing. A verified handle moves to its new holder.
 */
class ActorPlan {
  private readonly state: Map<string, ActorState | null>
  private readonly holder = new Map<string, string>()

  constructor(actors: Map<string, ActorState>) {
    this.state = new Map(actors)
    for (const [did, a] of actors) if (a.handle !== null) this.holder.set(a.handle, did)
  }

  get(did: string): ActorState | undefined {
    return this.state.get(did) ?? undefined
  }

  /** Every actor the plan knows, as the batch leaves it (null: deleted). */
  snapshot(): Map<string, ActorState | null> {
    return new Map(this.state)
  }

  set(did: string, next: ActorState): void {
    this.release(did)
    const previous = next.handle === null ? undefined : this.holder.get(next.handle)
    if (previous !== undefined && previous !== did) {
      this.state.set(previous, { ...this.state.get(previous)!, handle: null })
    }
    if (next.handle !== null) this.holder.set(next.handle, did)
    this.state.set(did, next)
  }

  remove(did: string): void {
    this.release(did)
    this.state.set(did, null)
  }

  private release(did: string): void {
    const handle = this.state.get(did)?.handle
    if (handle && this.holder.get(handle) === did) this.holder.delete(handle)
  }
}

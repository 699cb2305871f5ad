// Per repo, what the writer's committed batches left of the two things every batch's prepare step
// asks of each of its repos (prepare.ts): its actor's handle and check time (`actor`) and the last
// rev indexed for it (`actor_sync`). Asked of Postgres, they were a probe per repo per batch in
// each table, a sixth of Postgres' time at 500,000 events; most repos of a batch were in one a
// few seconds before.
//
// Correct only because nothing else writes these columns (the writer lock; the rpcs and bsync
// write other columns of `actor`): every change comes from a committed batch's plan, whose parts
// carry the actors it wrote and the revs it recorded, or from an account deletion or purge, which
// forgets the repo. What prepare reads from Postgres is kept too, unless a batch's commit was
// applied here while it read (the answer may predate it). An answer that predates a batch still
// being written is set right when that batch commits: its parts name every actor and rev it
// changed.
import type { CommittedPart } from './batch/committed-rows.ts'

/** An actor's handle and when it was last checked, as `actor` holds them. */
export type ActorState = { handle: string | null; indexedAt: string }

/** Repos kept at most (default of DATAPLANE_WRITER_KEPT_REPOS): about 50 MB (505 B a repo). */
export const KEPT_REPOS = 100_000

interface Entry {
  /** The actor row's handle and check time; null: no row; undefined: not known. */
  actor?: ActorState | null
  /** The `actor_sync` row's rev; null: no row; undefined: not known. */
  sync?: { rev: string | null } | null
}

export class CommittedRepos {
  private readonly max: number
  /** By DID, in order of last change, the oldest first. */
  private readonly repos = new Map<string, Entry>()
  private changes = 0

  constructor(max = KEPT_REPOS) {
    this.max = max
  }

  get size(): number {
    return this.repos.size
  }

  /** Counts committed changes: a read that spans one cannot be kept (`learn`). */
  get version(): number {
    return this.changes
  }

  actor(did: string): ActorState | null | undefined {
    return this.repos.get(did)?.actor
  }

  sync(did: string): { rev: string | null } | null | undefined {
    return this.repos.get(did)?.sync
  }

  /** A committed batch's parts, in the order they committed. */
  apply(parts: readonly CommittedPart[]): void {
    this.changes++
    if (this.max === 0) return
    for (const part of parts) {
      if ('account' in part) {
        // A deletion removes the actor row, a purge the actor_sync row too: asked again.
        this.repos.delete(part.account)
        continue
      }
      for (const [did, actor] of part.actors ?? []) this.set(did, { actor })
      for (const [did, rev] of part.revs ?? []) this.set(did, { sync: { rev } })
    }
  }

  /**
   * What prepare read of these repos (absent from `actors`/`syncs`: no row), kept unless a batch
   * committed since `version` was taken before the read.
   */
  learn(
    version: number,
    read: {
      actors?: { dids: readonly string[]; rows: Map<string, ActorState> }
      syncs?: { dids: readonly string[]; rows: Map<string, string | null> }
    },
  ): void {
    if (version !== this.changes || this.max === 0) return
    if (read.actors) {
      for (const did of read.actors.dids)
        this.set(did, { actor: read.actors.rows.get(did) ?? null })
    }
    if (read.syncs) {
      const { dids, rows } = read.syncs
      for (const did of dids)
        this.set(did, { sync: rows.has(did) ? { rev: rows.get(did)! } : null })
    }
  }

  private set(did: string, change: Entry): void {
    const entry = this.repos.get(did)
    if (entry) this.repos.delete(did)
    this.repos.set(did, entry ? Object.assign(entry, change) : change)
    if (this.repos.size > this.max) this.repos.delete(this.repos.keys().next().value!)
  }
}

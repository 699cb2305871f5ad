// The accounts a community deployment indexes: the DIDs it is configured with, the owners of its
// lists and the accounts those lists hold (list items written by the list's owner), and, if asked,
// the accounts those members follow (one step: followed accounts' own follows widen nothing).
//
// Membership is derived from what is indexed, so it follows the lists and follows live: the
// writer hands each committed batch's list item and follow changes here, and waits (settled())
// before its next batch until they are taken in. An account that joins is queued for a backfill
// of its whole repo (its live events are indexed from then on); one that leaves stops being
// indexed, and `openplane purge` removes what was indexed of it.
import { AtUri } from '@atproto/syntax'
import { sql, type Kysely } from 'kysely'
import { RepoTable } from '@openplane/backfill'
import type { DatabaseSchema } from '@openplane/db'
import type { Change, Scope } from '@openplane/ingest'
import { childLogger, counter, gauge } from '@openplane/telemetry'

const log = childLogger('community')
const accounts = gauge('openplane_community_accounts', 'Accounts in the indexed community', [
  'reason',
])
const changesTotal = counter(
  'openplane_community_changes_total',
  'Accounts that joined or left the indexed community',
  ['change'],
)

export interface CommunityOptions {
  /** Accounts always in the community. */
  dids: string[]
  /** app.bsky.graph.list records (at:// URIs) whose items are members; their owners are too. */
  lists: string[]
  /** Also index the accounts members follow. */
  follows: boolean
}

type Db = Kysely<DatabaseSchema>

export class Community implements Scope {
  private readonly db: Db
  private readonly opts: CommunityOptions
  private readonly repos: RepoTable
  /** List URI → its owner, who alone can add to it. */
  private readonly owners = new Map<string, string>()
  private members = new Set<string>()
  /** Accounts members follow → how many members follow them. */
  private followed = new Map<string, number>()
  private work: Promise<void> = Promise.resolve()
  version = 0

  private constructor(db: Db, opts: CommunityOptions) {
    this.db = db
    this.opts = opts
    this.repos = new RepoTable(db)
    for (const list of opts.lists) this.owners.set(list, new AtUri(list).host)
  }

  /**
   * The community as indexed now. `enqueue`: also ask for a backfill of each account not asked
   * for before (a fresh deployment starts with its configured accounts and list owners, and
   * grows as their lists and follows are written).
   */
  static async open(db: Db, opts: CommunityOptions, enqueue: boolean): Promise<Community> {
    const community = new Community(db, opts)
    await community.reload(false)
    if (enqueue) {
      const asked = await community.repos.enqueue(community.accounts())
      log.info({ accounts: community.size(), asked }, 'community loaded')
    }
    return community
  }

  has(did: string): boolean {
    return this.members.has(did) || this.followed.has(did)
  }

  settled(): Promise<void> {
    return this.work
  }

  /** Every account in the community. */
  accounts(): string[] {
    return [...new Set([...this.members, ...this.followed.keys()])]
  }

  size(): number {
    return this.accounts().length
  }

  /** Takes in a committed batch's changes (a writer's commit listener). */
  readonly onCommitted = (changes: Change[]): void => {
    let listsChanged = false
    const joined: string[] = []
    const left: string[] = []
    for (const c of changes) {
      if (c.table === 'list_item') {
        if (this.owners.get(c.row.listUri) === c.row.creator) listsChanged = true
      } else if (c.table === 'follow' && this.opts.follows && this.members.has(c.row.creator)) {
        const subject = c.row.subjectDid
        const before = this.has(subject)
        const n = (this.followed.get(subject) ?? 0) + (c.op === 'insert' ? 1 : -1)
        if (n > 0) this.followed.set(subject, n)
        else this.followed.delete(subject)
        if (!before && this.has(subject)) joined.push(subject)
        if (before && !this.has(subject)) left.push(subject)
      }
    }
    if (joined.length || left.length) this.changed(joined, left)
    // Lists change rarely: the members are read again, once per batch that touched them.
    if (listsChanged) this.later(() => this.reload(true))
  }

  /** Accounts that have rows in the index but are not in the community. */
  async outsiders(): Promise<string[]> {
    const { rows } = await sql<{ did: string }>`
      select did from actor union select distinct did from record`.execute(this.db)
    return rows.map((r) => r.did).filter((did) => !this.has(did))
  }

  /** Reads the members (and whom they follow) from the index; `live`: joiners are backfilled. */
  private async reload(live: boolean): Promise<void> {
    const before = live ? new Set(this.accounts()) : new Set<string>()
    const members = new Set([...this.opts.dids, ...this.owners.values()])
    if (this.owners.size) {
      const items = await this.db
        .selectFrom('list_item')
        .select(['subjectDid', 'creator', 'listUri'])
        .where('listUri', 'in', [...this.owners.keys()])
        .execute()
      for (const item of items) {
        if (this.owners.get(item.listUri) === item.creator) members.add(item.subjectDid)
      }
    }
    const followed = new Map<string, number>()
    if (this.opts.follows && members.size) {
      const { rows } = await sql<{ did: string; n: string }>`
        select "subjectDid" as did, count(*) as n from follow
        where creator = any(${[...members]}::text[]) group by "subjectDid"`.execute(this.db)
      for (const r of rows) followed.set(r.did, Number(r.n))
    }
    this.members = members
    this.followed = followed
    const after = new Set(this.accounts())
    if (live) {
      const joined = [...after].filter((did) => !before.has(did))
      const left = [...before].filter((did) => !after.has(did))
      if (joined.length || left.length) this.changed(joined, left)
    } else {
      this.version++
    }
    this.measure()
  }

  /** Accounts joined and left: the writer re-scopes, joiners' repos are fetched (again). */
  private changed(joined: string[], left: string[]): void {
    this.version++
    this.measure()
    changesTotal.inc({ change: 'joined' }, joined.length)
    changesTotal.inc({ change: 'left' }, left.length)
    if (left.length) {
      log.info({ accounts: left.length, sample: left.slice(0, 5) }, 'accounts left the community')
    }
    if (!joined.length) return
    log.info(
      { accounts: joined.length, sample: joined.slice(0, 5) },
      'accounts joined the community',
    )
    // Fetched again even if fetched before: events skipped while it was outside are in its repo.
    this.later(async () => void (await this.repos.enqueue(joined, { refetch: true })))
  }

  /**
   * Runs `fn` after the work queued before it; the writer waits for all of it. A failure (Postgres
   * away) is retried until it goes through: batches would not be written meanwhile anyway.
   */
  private later(fn: () => Promise<void>): void {
    this.work = this.work.then(async () => {
      for (let attempt = 0; ; attempt++) {
        try {
          return await fn()
        } catch (err) {
          log.error({ err }, 'community membership could not be updated; retrying')
          await new Promise((r) => setTimeout(r, Math.min(30_000, 500 * 2 ** attempt)))
        }
      }
    })
  }

  private measure(): void {
    accounts.set({ reason: 'member' }, this.members.size)
    // Members followed by members count here too.
    accounts.set({ reason: 'followed' }, this.followed.size)
  }
}

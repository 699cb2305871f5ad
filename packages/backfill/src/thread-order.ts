// Replies and quotes wait for the records they are judged on. The stock judges a reply when it is
// written (its parent missing makes it an invalid reply, a thread gate missing lets it through,
// the ancestors it notifies are those indexed by then) and a quote by the quoted post's gate. The
// firehose brings parents first; a backfill fetches repos in no such order. So a reply or quote
// whose context is in a repo this backfill has not written yet waits, and its repo with it (not
// marked done, its live events still held), until that record is written or its repo is done
// (or failed): then it is written as the firehose's order would have met it. Records never wait
// in a circle: a reply names its parent's CID, so the parent is older; gates depend on nothing.
// A record that may not exist (a thread gate) is known absent once its repo's CAR is read to
// the end, not when the repo is done: that repo may itself wait for this one's records.
import { sql, type Kysely } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'
import type { CommitOp, IngestEvent } from '@openplane/ingest'
import { contextOf } from '@openplane/plugins'
import { counter } from '@openplane/telemetry'

const waitedTotal = counter(
  'openplane_backfill_waited_records_total',
  'Replies and quotes that waited for their context to be written first',
)

type Commit = Extract<IngestEvent, { type: 'commit' }>

interface Waiter {
  did: string
  commit: string
  rev: string
  op: CommitOp
  /** Records it waits for (by uri), and the repos that would write them. */
  uris: Set<string>
  dids: Set<string>
}

const didOf = (uri: string) => uri.split('/')[2] ?? ''

/** Records of one repo that stopped waiting, with the commit they belong to. */
export interface Woken {
  commit: string
  rev: string
  ops: CommitOp[]
}

export class ThreadOrder {
  private readonly db: Kysely<DatabaseSchema>
  private readonly byRepo = new Map<string, Waiter[]>()
  private readonly byUri = new Map<string, Set<Waiter>>()
  private readonly byDid = new Map<string, Set<Waiter>>()

  constructor(db: Kysely<DatabaseSchema>) {
    this.db = db
  }

  /** Whether the repo has records waiting. */
  waiting(did: string): boolean {
    return (this.byRepo.get(did)?.length ?? 0) > 0
  }

  /** Whether any repo has records waiting. */
  any(): boolean {
    return this.byRepo.size > 0
  }

  /** A repo's events with the ops that must wait taken out (kept here). */
  async split(did: string, events: Commit[]): Promise<Commit[]> {
    const wanted = new Map<CommitOp, string[]>()
    for (const evt of events) {
      for (const op of evt.ops) {
        if (op.action === 'delete') continue
        const uris = contextOf(op.collection, op.record)
        if (uris.length) wanted.set(op, uris)
      }
    }
    if (!wanted.size) return events
    const all = [...new Set([...wanted.values()].flat())]
    const { indexed, unwritten } = await this.lookup(all, [
      ...new Set(all.map(didOf).filter((d) => d !== did)),
    ])
    const mine = new Set(this.byRepo.get(did)?.map((w) => uriOf(w.did, w.op)))
    const out: Commit[] = []
    for (const evt of events) {
      const ops = evt.ops.filter((op) => {
        const uris = (wanted.get(op) ?? []).filter(
          (u) => !indexed.has(u) && (mine.has(u) || (didOf(u) !== did && unwritten.has(didOf(u)))),
        )
        if (!uris.length) return true
        this.add({
          did,
          commit: evt.commit,
          rev: evt.rev,
          op,
          uris: new Set(uris),
          dids: new Set(uris.map(didOf)),
        })
        mine.add(uriOf(did, op))
        return false
      })
      if (ops.length) out.push({ ...evt, ops })
    }
    return out
  }

  /** These records were written: what waited only for them, per repo, in its order. */
  written(uris: Iterable<string>): Map<string, Woken> {
    const woken = new Set<Waiter>()
    for (const uri of uris) {
      for (const w of this.byUri.get(uri) ?? []) {
        w.uris.delete(uri)
        woken.add(w)
      }
      this.byUri.delete(uri)
    }
    return this.release(woken, (w) => w.uris.size === 0)
  }

  /**
   * The repo's CAR is read to the end: a record of it not written by now never will be, except
   * its own records still waiting here. (`failed`: those will not be written either.)
   */
  sealed(did: string, failed = false): Map<string, Woken> {
    const coming = failed
      ? new Set<string>()
      : new Set(this.byRepo.get(did)?.map((w) => uriOf(did, w.op)))
    const woken = new Set(this.byDid.get(did) ?? [])
    for (const w of woken) {
      for (const u of [...w.uris]) if (didOf(u) === did && !coming.has(u)) w.uris.delete(u)
      if (![...w.uris].some((u) => didOf(u) === did)) {
        w.dids.delete(did)
        this.byDid.get(did)?.delete(w)
      }
    }
    if (!this.byDid.get(did)?.size) this.byDid.delete(did)
    return this.release(woken, (w) => w.uris.size === 0)
  }

  /** Forgets the repo's waiting records (its fetch failed: they come again with the next one). */
  drop(did: string): void {
    for (const w of this.byRepo.get(did) ?? []) {
      for (const u of w.uris) this.byUri.get(u)?.delete(w)
      for (const d of w.dids) this.byDid.get(d)?.delete(w)
    }
    this.byRepo.delete(did)
  }

  /** Everything still waiting (the backfill ends): written as it is. */
  all(): Map<string, Woken> {
    return this.release(new Set([...this.byRepo.values()].flat()), () => true)
  }

  private add(w: Waiter): void {
    waitedTotal.inc()
    const list = this.byRepo.get(w.did) ?? []
    list.push(w)
    this.byRepo.set(w.did, list)
    for (const u of w.uris) this.byUri.set(u, (this.byUri.get(u) ?? new Set()).add(w))
    for (const d of w.dids) this.byDid.set(d, (this.byDid.get(d) ?? new Set()).add(w))
  }

  private release(woken: Set<Waiter>, ready: (w: Waiter) => boolean): Map<string, Woken> {
    const out = new Map<string, Woken>()
    // Only the repos of woken records (not every repo waiting: thousands may wait at once).
    for (const did of new Set([...woken].map((w) => w.did))) {
      const list = this.byRepo.get(did) ?? []
      const keep: Waiter[] = []
      for (const w of list) {
        if (woken.has(w) && ready(w)) {
          const got = out.get(did) ?? { commit: w.commit, rev: w.rev, ops: [] }
          got.ops.push(w.op)
          out.set(did, got)
          for (const u of w.uris) this.byUri.get(u)?.delete(w)
          for (const d of w.dids) this.byDid.get(d)?.delete(w)
        } else keep.push(w)
      }
      if (keep.length) this.byRepo.set(did, keep)
      else this.byRepo.delete(did)
    }
    return out
  }

  /** Lookups asked for in this turn, answered together (see lookup). */
  private asked: {
    uris: string[]
    dids: string[]
    resolve: (found: Found) => void
    reject: (err: unknown) => void
  }[] = []

  /**
   * Of these records, those indexed; of these repos, those this backfill has yet to write
   * (pending). The repos split in one turn ask in one statement: each costs a round trip, and
   * small repos come many at a time. (The answer may hold more than was asked: facts about
   * other records and repos, true at the same moment.)
   */
  private lookup(uris: string[], dids: string[]): Promise<Found> {
    return new Promise((resolve, reject) => {
      if (!this.asked.length) setImmediate(() => void this.answer())
      this.asked.push({ uris, dids, resolve, reject })
    })
  }

  private async answer(): Promise<void> {
    const asked = this.asked
    this.asked = []
    const uris = [...new Set(asked.flatMap((a) => a.uris))]
    const dids = [...new Set(asked.flatMap((a) => a.dids))]
    try {
      const { rows } = await sql<{ kind: 'record' | 'repo'; key: string }>`
        select 'record' as kind, uri as key from record where uri = any(${uris}::text[])
        union all
        select 'repo', did from openplane_repo
        where did = any(${dids}::text[]) and state = 'pending'`.execute(this.db)
      const found: Found = { indexed: new Set(), unwritten: new Set() }
      for (const r of rows) (r.kind === 'record' ? found.indexed : found.unwritten).add(r.key)
      for (const a of asked) a.resolve(found)
    } catch (err) {
      for (const a of asked) a.reject(err)
    }
  }
}

interface Found {
  indexed: Set<string>
  unwritten: Set<string>
}

export const uriOf = (did: string, op: { collection: string; rkey: string }) =>
  `at://${did}/${op.collection}/${op.rkey}`

// A repo's records as the writer's events: what the index must do to hold exactly the repo's
// records at the fetched rev. Compared with the `record` rows the index has for the repo (what
// the stock's own repair compares): a record it lacks is created, one whose CID changed is
// updated, one the repo no longer has is deleted, an unchanged one is left alone. So fetching a
// repo again (a resumed backfill, a #sync) writes only the difference.
import { sql, type Kysely } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'
import type { CommitOp, IngestEvent, Writer } from '@openplane/ingest'
import { pluginFor } from '@openplane/plugins'
import type { RepoCar } from './car.ts'

type Commit = Extract<IngestEvent, { type: 'commit' }>

export interface EventSource {
  /** A fresh seq for each event (the writer keys retries on them). */
  seq(): number
  /** Stamped as the records' indexedAt (the stock's repair stamps the time it indexes). */
  time: string
  /** Ops per event at most. */
  opsPerEvent: number
}

/** What the index holds of a repo, read before its records are written. */
export interface IndexedRepo {
  /** Its records' CIDs, by URI. */
  records: Map<string, string>
  /**
   * Nothing of it: no record, nor a feed item (an account deletion leaves those). Its records'
   * rows are then known absent when written (`unseen` on its creates).
   */
  fresh: boolean
}

/** A row per record of the repos, and one with a null uri per repo that has a feed item. */
const readRepos = (db: Kysely<DatabaseSchema>, dids: string[]) =>
  sql<{ did: string; uri: string | null; cid: string | null }>`
    select did, uri, cid from record where did = any(${dids}::text[])
    union all
    select f."originatorDid", null, null from unnest(${dids}::text[]) d(did)
    cross join lateral (
      select "originatorDid" from feed_item where "originatorDid" = d.did limit 1
    ) f`.execute(db)

function byRepo(
  dids: string[],
  rows: { did: string; uri: string | null; cid: string | null }[],
): Map<string, IndexedRepo> {
  const out = new Map(dids.map((d) => [d, { records: new Map<string, string>(), fresh: true }]))
  for (const r of rows) {
    const repo = out.get(r.did)
    if (!repo) continue
    repo.fresh = false
    if (r.uri !== null) repo.records.set(r.uri, r.cid!)
  }
  return out
}

/** What the index holds of one repo. */
export async function indexedRecords(
  db: Kysely<DatabaseSchema>,
  did: string,
): Promise<IndexedRepo> {
  const { rows } = await readRepos(db, [did])
  return byRepo([did], rows).get(did)!
}

/**
 * The index's records of many repos, read in one query: repos taken together ask in the same
 * turn, and one statement answers them all instead of one each (each statement costs a round
 * trip and a wake-up of both processes, which on a small VM is most of a small repo's cost).
 */
export class IndexedRecords {
  private readonly db: Kysely<DatabaseSchema>
  private readonly writer: Writer
  private waiting = new Map<string, ((m: IndexedRepo | undefined) => void)[]>()
  private scheduled = false

  constructor(db: Kysely<DatabaseSchema>, writer: Writer) {
    this.db = db
    this.writer = writer
  }

  /**
   * What the index holds of the repo, or undefined if it could not be read (read it again). Ask
   * once the repo is held: the read waits for the batches already being written, so none of the
   * repo's live events lands after it.
   */
  load(did: string): Promise<IndexedRepo | undefined> {
    return new Promise((resolve) => {
      const list = this.waiting.get(did)
      if (list) list.push(resolve)
      else this.waiting.set(did, [resolve])
      if (!this.scheduled) {
        this.scheduled = true
        setImmediate(() => void this.flush())
      }
    })
  }

  private async flush(): Promise<void> {
    this.scheduled = false
    const waiting = this.waiting
    this.waiting = new Map()
    const dids = [...waiting.keys()]
    let byDid: Map<string, IndexedRepo> | undefined
    try {
      const { rows } = await this.writer.between(() => readRepos(this.db, dids))
      byDid = byRepo(dids, rows)
    } catch {
      byDid = undefined
    }
    for (const [did, resolvers] of waiting) for (const r of resolvers) r(byDid?.get(did))
  }
}

export interface RepoDiffCounts {
  records: number
  created: number
  updated: number
  deleted: number
  unchanged: number
  bad: number
}

/** Events that make the index hold the CAR's records, `opsPerEvent` ops to an event. */
export async function* repoEvents(
  car: RepoCar,
  repo: IndexedRepo,
  src: EventSource,
  counts: RepoDiffCounts,
  onBad: (key: string, reason: string) => void,
): AsyncIterable<Commit> {
  const indexed = repo.records
  // A fresh repo's creates are marked: no row keyed by them can exist.
  const unseen = repo.fresh ? ({ unseen: true } as const) : {}
  let ops: CommitOp[] = []
  const event = (): Commit => {
    const evt: Commit = {
      type: 'commit',
      seq: src.seq(),
      time: src.time,
      did: car.did,
      commit: car.commit,
      rev: car.rev,
      ops,
    }
    ops = []
    return evt
  }
  const badRecord = (key: string, reason: string) => {
    counts.bad++
    onBad(key, reason)
  }
  for await (const rec of car.records(badRecord)) {
    // Collections no plugin indexes leave no row (the stock skips them too).
    if (!pluginFor(rec.collection)) continue
    counts.records++
    const uri = `at://${car.did}/${rec.collection}/${rec.rkey}`
    const cid = rec.cid
    const had = indexed.get(uri)
    indexed.delete(uri)
    if (had === cid) {
      counts.unchanged++
      continue
    }
    if (had === undefined) counts.created++
    else counts.updated++
    const action = had === undefined ? 'create' : 'update'
    const { collection, rkey, record, checked } = rec
    ops.push(
      checked
        ? { action, collection, rkey, cid, record, checked, ...unseen }
        : { action, collection, rkey, cid, record, ...unseen },
    )
    if (ops.length >= src.opsPerEvent) yield event()
  }
  // What the index has and the repo does not: gone since (or never there at this rev).
  for (const uri of indexed.keys()) {
    const [, , , collection, rkey] = uri.split('/')
    if (!collection || !rkey) continue
    counts.deleted++
    ops.push({ action: 'delete', collection, rkey })
    if (ops.length >= src.opsPerEvent) yield event()
  }
  if (ops.length) yield event()
}

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

/** The repo's current record CIDs in the index, by URI. */
export async function indexedRecords(
  db: Kysely<DatabaseSchema>,
  did: string,
): Promise<Map<string, string>> {
  const { rows } = await sql<{ uri: string; cid: string }>`
    select uri, cid from record where did = ${did}`.execute(db)
  return new Map(rows.map((r) => [r.uri, r.cid]))
}

/**
 * The index's records of many repos, read in one query: repos taken together ask in the same
 * turn, and one statement answers them all instead of one each (each statement costs a round
 * trip and a wake-up of both processes, which on a small VM is most of a small repo's cost).
 */
export class IndexedRecords {
  private readonly db: Kysely<DatabaseSchema>
  private readonly writer: Writer
  private waiting = new Map<string, ((m: Map<string, string> | undefined) => void)[]>()
  private scheduled = false

  constructor(db: Kysely<DatabaseSchema>, writer: Writer) {
    this.db = db
    this.writer = writer
  }

  /**
   * The repo's records by URI, or undefined if they could not be read (read them again). Ask
   * once the repo is held: the read waits for the batches already being written, so none of the
   * repo's live events lands after it.
   */
  load(did: string): Promise<Map<string, string> | undefined> {
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
    let byDid: Map<string, Map<string, string>> | undefined
    try {
      const { rows } = await this.writer.between(() =>
        sql<{ did: string; uri: string; cid: string }>`
          select did, uri, cid from record where did = any(${dids}::text[])`.execute(this.db),
      )
      byDid = new Map(dids.map((d) => [d, new Map<string, string>()]))
      for (const r of rows) byDid.get(r.did)?.set(r.uri, r.cid)
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
  indexed: Map<string, string>,
  src: EventSource,
  counts: RepoDiffCounts,
  onBad: (key: string, reason: string) => void,
): AsyncIterable<Commit> {
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
        ? { action, collection, rkey, cid, record, checked }
        : { action, collection, rkey, cid, record },
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

// What the indexer publishes of what it committed: each applied record op, identity and account
// event as a Jetstream message (the `/subscribe` stream's wire format), appended to the
// published-event log in the batch's own transaction, so a consumer never reads what the AppView
// cannot and a restart neither loses nor repeats one. Planning notes the applied events (rolled
// back with a step that is undone); their messages are made only here, when publishing is on.
// Events made from a fetched repo (a backfill) are not published: like Jetstream, the stream
// carries what the network streamed.
import type { Kysely } from 'kysely'
import {
  appendPublished,
  publishedRange,
  type DatabaseSchema,
  type PublishedEvent,
} from '@openplane/db'
import { counter } from '@openplane/telemetry'
import { jsonOf } from './batch/records.ts'
import type { Applied } from './batch/applied.ts'
import type { IngestEvent } from './events.ts'

export type { Applied } from './batch/applied.ts'

const published = counter(
  'openplane_published_events_total',
  'Messages appended to the published-event log (/subscribe), by kind',
  ['kind'],
)

/** The message's text after its cursor, from `"kind"` on. */
function body(a: Applied): string {
  const did = JSON.stringify(a.evt.did)
  const seq = a.evt.seq
  const time = JSON.stringify(a.evt.time)
  switch (a.kind) {
    case 'commit': {
      const { evt, op } = a
      const head =
        `"kind":"commit","commit":{"rev":${JSON.stringify(evt.rev)},` +
        `"operation":"${op.action}","collection":${JSON.stringify(op.collection)},` +
        `"rkey":${JSON.stringify(op.rkey)}`
      if (op.action === 'delete') return `${head}}}`
      const json = op.checked && 'json' in op.checked ? op.checked.json : jsonOf(op.record)
      return `${head},"record":${json},"cid":${JSON.stringify(op.cid ?? '')}}}`
    }
    case 'identity': {
      const handle = a.handle === undefined ? '' : `"handle":${JSON.stringify(a.handle)},`
      return `"kind":"identity","identity":{"did":${did},${handle}"seq":${seq},"time":${time}}}`
    }
    case 'account': {
      const { evt } = a
      const status = a.deleted ? 'deleted' : evt.status
      const active = !a.deleted && evt.active
      const st = active || status === undefined ? '' : `"status":${JSON.stringify(status)},`
      return (
        `"kind":"account","account":{"active":${active},"did":${did},` +
        `"seq":${seq},${st}"time":${time}}}`
      )
    }
  }
}

/** The whole message at cursor `timeUs`. */
export function messageOf(a: Applied, timeUs: number): PublishedEvent {
  const did = a.evt.did
  return {
    timeUs,
    did,
    collection: a.kind === 'commit' ? a.op.collection : null,
    message: `{"did":${JSON.stringify(did)},"time_us":${timeUs},${body(a)}`,
  }
}

/**
 * Gives each published message its cursor — microseconds of the wall clock, moved on by one
 * where the clock has not (or went back) — and appends them in the transaction.
 */
export class Publisher {
  /** The last cursor given; read from the log on first use (a restart continues above it). */
  private last: number | undefined

  /**
   * The last cursor given, read from the log the first time: called before `write` when that
   * goes to a recorder, which answers no read.
   */
  async ready(db: Kysely<DatabaseSchema>): Promise<number> {
    return (this.last ??= (await publishedRange(db))?.last ?? 0)
  }

  /** Appends the messages; returns the metrics to count once the transaction commits. */
  async write(
    tx: Kysely<DatabaseSchema>,
    applied: Applied[],
    opts: { fetched?: ReadonlySet<IngestEvent>; copy?: boolean } = {},
  ): Promise<(() => void) | undefined> {
    const { fetched } = opts
    const items = fetched?.size ? applied.filter((a) => !fetched.has(a.evt)) : applied
    if (!items.length) return undefined
    let t = Math.max(Date.now() * 1000, (await this.ready(tx)) + 1)
    const rows = items.map((a) => messageOf(a, t++))
    await appendPublished(tx, rows, opts.copy ?? false)
    // Kept even if the transaction rolls back: cursors must only increase, not be dense.
    this.last = t - 1
    return () => {
      for (const a of items) published.inc({ kind: a.kind })
    }
  }
}

// Live events of repos whose backfill is in flight. A repo's backfill writes its records as of
// the rev it fetched; live events for it that arrive meanwhile are set aside here (the batch
// keeps a skip in their place, so the cursor still moves) and written after the backfill, in
// the same transaction as its last records, if they are newer than that rev. Events a
// backfilled repo's CAR already covers (a relay running behind the PDS) are dropped for a while
// after, too.
//
// Nothing here is persisted, on purpose: an event is held only while its repo is not marked
// done, and a repo not done is fetched again after a restart, from a PDS that already has the
// held commits (a relay only relays what its PDS committed).
import { counter } from '@openplane/telemetry'
import type { IngestEvent } from './events.ts'

const heldTotal = counter(
  'openplane_backfill_live_events_total',
  'Live events of repos being backfilled, by what became of them',
  ['outcome'],
)

/** How many recently backfilled repos keep dropping live events their CAR covered. */
const RECENT_LIMIT = 100_000

const skipOf = (evt: IngestEvent): IngestEvent => ({
  type: 'skip',
  seq: evt.seq,
  time: evt.time,
  did: '',
})

/** Whether the event changes the repo after `rev` (identity and account events always do). */
const newerThan = (evt: IngestEvent, rev: string) =>
  evt.type === 'commit' || evt.type === 'sync' ? evt.rev > rev : true

export class RepoGate {
  private readonly held = new Map<string, IngestEvent[]>()
  /**
   * Recently backfilled repos, oldest first: the rev they were written at, and the last held
   * seq written with them (a batch that held it and is retried must not write it again).
   */
  private readonly recent = new Map<string, { rev: string; seq: number }>()
  /** Changes whenever the set of held repos does: a batch planned before is planned again. */
  version = 0

  /** Starts holding the repo's live events. */
  hold(did: string): void {
    if (this.held.has(did)) return
    this.held.set(did, [])
    this.recent.delete(did)
    this.version++
  }

  holding(did: string): boolean {
    return this.held.has(did)
  }

  /**
   * The batch with each event of a held repo set aside (a skip in its place), and each commit a
   * recent backfill already covered dropped. Idempotent: a batch given again (a retry) holds
   * nothing twice. `peek`: only says what would be set aside (for planning a batch ahead).
   */
  divert(batch: IngestEvent[], peek = false): IngestEvent[] {
    if (!this.held.size && !this.recent.size) return batch
    let out: IngestEvent[] | undefined
    for (const [i, evt] of batch.entries()) {
      const replace = evt.did ? this.take(evt, peek) : false
      if (!replace) continue
      out ??= batch.slice()
      out[i] = skipOf(evt)
    }
    return out ?? batch
  }

  /** The held events newer than `rev`, in arrival order (they stay held until release). */
  newer(did: string, rev: string): IngestEvent[] {
    return (this.held.get(did) ?? []).filter((evt) => newerThan(evt, rev))
  }

  /**
   * Stops holding the repo. With `rev` (its backfill was written at it), the events held are
   * counted as applied or covered, and later ones the CAR covered keep being dropped for a while;
   * without, its backfill failed and the repo is fetched again later, held events included.
   */
  release(did: string, rev?: string): void {
    const events = this.held.get(did)
    if (!events) return
    this.held.delete(did)
    this.version++
    if (rev === undefined) {
      heldTotal.inc({ outcome: 'refetch' }, events.length)
      return
    }
    for (const evt of events)
      heldTotal.inc({ outcome: newerThan(evt, rev) ? 'applied' : 'covered' })
    this.recent.set(did, { rev, seq: events[events.length - 1]?.seq ?? -1 })
    if (this.recent.size > RECENT_LIMIT) this.recent.delete(this.recent.keys().next().value!)
  }

  /** Whether the event is set aside (held, or covered by a recent backfill). */
  private take(evt: IngestEvent, peek: boolean): boolean {
    const held = this.held.get(evt.did)
    if (held) {
      const last = held[held.length - 1]
      if (!peek && (!last || last.seq < evt.seq)) {
        held.push(evt)
        heldTotal.inc({ outcome: 'held' })
      }
      return true
    }
    const recent = this.recent.get(evt.did)
    if (!recent || (evt.seq > recent.seq && newerThan(evt, recent.rev))) return false
    if (!peek) heldTotal.inc({ outcome: 'covered' })
    return true
  }
}

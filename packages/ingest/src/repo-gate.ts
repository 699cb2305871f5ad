// Live events of repos whose backfill is in flight. A repo's backfill writes its records as of
// the rev it fetched; live events for it that arrive meanwhile are set aside here (the batch
// keeps a skip in their place, so the cursor still moves) and written after the backfill, in
// the same transaction as its last records, if they are newer than that rev. Events a
// backfilled repo's CAR already covers (a relay running behind the PDS) are dropped for a while
// after, too.
//
// A held event is never dropped for want of a CAR: when the repo cannot be fetched (its PDS is
// down, refuses, says the repo is gone) its held events are written as live events, in order,
// as the stock would have written them, and the repo is left out of sync for a later fetch to
// reconcile. Holding is bounded: a repo past `perRepo` held events, or any repo adding to more
// than `total` in all, is reported (onOverflow) so its fetch is given up the same way. Held events
// are also written to Postgres in the transaction that moves the cursor past them (writer.ts),
// so a crash while holding loses none: a restart applies them first.
import { counter, gauge } from '@openplane/telemetry'
import type { IngestEvent } from './events.ts'

const heldTotal = counter(
  'openplane_backfill_live_events_total',
  'Live events of repos being backfilled, by what became of them (held; then applied after the ' +
    'CAR, covered by it, or written as live when the repo could not be fetched: unfetched)',
  ['outcome'],
)
const heldNow = gauge(
  'openplane_backfill_held_events',
  'Live events held now for repos being backfilled',
)
const overflows = counter(
  'openplane_backfill_hold_overflows_total',
  'Repos whose held live events passed a bound (their fetch is given up and the events written)',
  ['bound'],
)

/** How many recently backfilled repos keep dropping live events their CAR covered. */
const RECENT_LIMIT = 100_000

export interface HoldLimits {
  /** Held events of one repo past which its fetch is given up. */
  perRepo: number
  /** Held events of all repos past which the repo adding to them is given up. */
  total: number
}

export const HOLD_DEFAULTS: HoldLimits = { perRepo: 5_000, total: 100_000 }

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
  private readonly limits: HoldLimits
  private count = 0
  /** Repos reported past a bound, until released (reported once). */
  private readonly overflowed = new Set<string>()
  private overflowListeners: ((did: string) => void)[] = []
  /** Changes whenever the set of held repos does: a batch planned before is planned again. */
  version = 0

  constructor(limits: HoldLimits = HOLD_DEFAULTS) {
    this.limits = limits
  }

  /** Called with a repo whose held events passed a bound; its holder should let them go. */
  onOverflow(listener: (did: string) => void): void {
    this.overflowListeners.push(listener)
  }

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

  /** Whether any live event of the repo is held now. */
  hasHeld(did: string): boolean {
    return (this.held.get(did)?.length ?? 0) > 0
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

  /**
   * The events of the batch that are held (after divert): what must be kept with the batch's
   * cursor, since the cursor moves past them.
   */
  heldIn(batch: IngestEvent[]): IngestEvent[] {
    if (!this.held.size) return []
    return batch.filter((evt) => evt.type !== 'skip' && this.held.has(evt.did))
  }

  /**
   * The held events newer than `rev`, or all of them without one, in arrival order (they stay
   * held until release).
   */
  newer(did: string, rev?: string): IngestEvent[] {
    const held = this.held.get(did) ?? []
    return rev === undefined ? held.slice() : held.filter((evt) => newerThan(evt, rev))
  }

  /**
   * Stops holding the repo, once what `newer` gave was written. With `rev` (its backfill was
   * written at it), the events held are counted as applied or covered, and later ones the CAR
   * covered keep being dropped for a while; without, its fetch failed and every held event was
   * written as live.
   */
  release(did: string, rev?: string): void {
    const events = this.held.get(did)
    if (!events) return
    this.held.delete(did)
    this.overflowed.delete(did)
    this.count -= events.length
    heldNow.set(this.count)
    this.version++
    if (rev === undefined) {
      heldTotal.inc({ outcome: 'unfetched' }, events.length)
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
        this.count++
        heldNow.set(this.count)
        heldTotal.inc({ outcome: 'held' })
        this.checkBounds(evt.did, held.length)
      }
      return true
    }
    const recent = this.recent.get(evt.did)
    if (!recent || (evt.seq > recent.seq && newerThan(evt, recent.rev))) return false
    if (!peek) heldTotal.inc({ outcome: 'covered' })
    return true
  }

  private checkBounds(did: string, length: number): void {
    const bound =
      length > this.limits.perRepo ? 'repo' : this.count > this.limits.total ? 'total' : undefined
    if (!bound || this.overflowed.has(did)) return
    this.overflowed.add(did)
    overflows.inc({ bound })
    for (const listener of this.overflowListeners) listener(did)
  }
}

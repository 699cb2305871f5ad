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
//
// A post of another repo that replies to, or quotes, a record of a held repo is judged against
// that record (a reply's validity, its thread's notifications, a quote's embedding rules), which
// is not written yet: such a post's repo waits with the held one — its events are held from
// there on and written right after the held repo's, in stream order, when that one is let go.
import { contextOf } from '@openplane/plugins'
import { counter, gauge } from '@openplane/telemetry'
import type { IngestEvent } from './events.ts'

const heldTotal = counter(
  'openplane_backfill_live_events_total',
  'Live events of repos being backfilled, by what became of them (held; then applied after the ' +
    'CAR, covered by it, or written as live when the repo could not be fetched: unfetched), and ' +
    "of other repos' posts that refer to their records (held too; written after them: waited)",
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

/** The repos whose records a commit's posts are judged by (@openplane/plugins' contextOf). */
function referencedRepos(evt: IngestEvent): string[] {
  if (evt.type !== 'commit') return []
  const dids: string[] = []
  for (const op of evt.ops) {
    if (op.action === 'delete') continue
    for (const uri of contextOf(op.collection, op.record)) dids.push(uri.split('/')[2] ?? '')
  }
  return dids
}

export class RepoGate {
  private readonly held = new Map<string, IngestEvent[]>()
  /** Repos held only because they refer to a held repo's records → the repo they wait for. */
  private readonly waitsFor = new Map<string, string>()
  /** The other way: a held repo → the repos waiting for it. */
  private readonly waiting = new Map<string, Set<string>>()
  /** Held repos whose held posts refer to another held repo's records → those repos. */
  private readonly refersTo = new Map<string, Set<string>>()
  /** Waiting repos whose own fetch was written (defer): the rev their CAR covers. */
  private readonly coveredTo = new Map<string, string>()
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

  /** Whether any live event of the repo, or of a repo waiting for it, is held now. */
  hasHeld(did: string): boolean {
    return this.family(did).some((d) => (this.held.get(d)?.length ?? 0) > 0)
  }

  /** The repo and the repos waiting for it: whose held events are written with its own. */
  family(did: string): string[] {
    const waiting = this.waiting.get(did)
    return waiting ? [did, ...waiting] : [did]
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
    const own = rev === undefined ? held.slice() : held.filter((evt) => newerThan(evt, rev))
    const waiting = this.waiting.get(did)
    if (!waiting?.size) return own
    // The repos waiting for it: every event they held (that their own CAR, if written, does not
    // cover), in stream order with its own.
    const theirs = [...waiting].map((d) => {
      const events = this.held.get(d) ?? []
      const covered = this.coveredTo.get(d)
      return covered === undefined ? events : events.filter((evt) => newerThan(evt, covered))
    })
    const all = own.concat(...theirs)
    return all.sort((a, b) => a.seq - b.seq)
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
    this.refersTo.delete(did)
    this.coveredTo.delete(did)
    this.count -= events.length
    // A repo that waited for another and is now let go on its own (fetched itself).
    const holder = this.waitsFor.get(did)
    if (holder !== undefined) {
      this.waitsFor.delete(did)
      this.waiting.get(holder)?.delete(did)
    }
    // The repos waiting for it were written with it (newer): let go too.
    for (const waiter of this.waiting.get(did) ?? []) {
      const theirs = this.held.get(waiter) ?? []
      this.held.delete(waiter)
      this.waitsFor.delete(waiter)
      this.overflowed.delete(waiter)
      this.refersTo.delete(waiter)
      this.coveredTo.delete(waiter)
      this.count -= theirs.length
      heldTotal.inc({ outcome: 'waited' }, theirs.length)
    }
    this.waiting.delete(did)
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
    const held = this.held.get(evt.did) ?? this.waitFor(evt, peek)
    if (held) {
      const last = held[held.length - 1]
      if (!peek && (!last || last.seq < evt.seq)) {
        held.push(evt)
        this.noteReferences(evt)
        this.count++
        heldNow.set(this.count)
        heldTotal.inc({ outcome: 'held' })
        this.checkBounds(evt.did, held.length)
      }
      return true
    }
    return this.covered(evt, peek)
  }

  /** Whether a recent backfill of the repo already wrote what the event does (it is dropped). */
  private covered(evt: IngestEvent, peek: boolean): boolean {
    const recent = this.recent.get(evt.did)
    if (!recent || (evt.seq > recent.seq && newerThan(evt, recent.rev))) return false
    if (!peek) heldTotal.inc({ outcome: 'covered' })
    return true
  }

  /**
   * For an event of a repo not held that refers to a held repo's record (and is not covered by
   * its own recent backfill): the list its repo's events are held in from now on, waiting for
   * that repo. In `peek`, an empty list that is not kept.
   */
  private waitFor(evt: IngestEvent, peek: boolean): IngestEvent[] | undefined {
    const holder = this.holderOf(evt)
    if (holder === undefined || this.covered(evt, true)) return undefined
    if (peek) return []
    const held: IngestEvent[] = []
    this.held.set(evt.did, held)
    this.waitsFor.set(evt.did, holder)
    let waiting = this.waiting.get(holder)
    if (!waiting) this.waiting.set(holder, (waiting = new Set()))
    waiting.add(evt.did)
    this.version++
    return held
  }

  /** Notes which other held repos a held post refers to (see waitsOn). */
  private noteReferences(evt: IngestEvent): void {
    for (const did of referencedRepos(evt)) {
      if (did === evt.did || !this.held.has(did)) continue
      let refs = this.refersTo.get(evt.did)
      if (!refs) this.refersTo.set(evt.did, (refs = new Set()))
      refs.add(did)
    }
  }

  /**
   * For a held repo about to be let go: another repo still held (and not let go in the same
   * write, `finishing`) that its held posts, or those of a repo waiting for it, refer to — its
   * held events should wait for that one (defer) instead of being written now, before the
   * records they refer to.
   */
  waitsOn(did: string, finishing: ReadonlySet<string>): string | undefined {
    for (const member of this.family(did)) {
      for (const other of this.refersTo.get(member) ?? []) {
        if (!this.held.has(other)) continue
        const root = this.waitsFor.get(other) ?? other
        if (root !== did && !finishing.has(root) && this.held.has(root)) return root
      }
    }
    return undefined
  }

  /**
   * Ends the repo's own hold (its fetch was written at `rev`, or failed without one) but keeps
   * its held events newer than `rev`, now waiting for `holder`: they are written when that repo
   * is let go. Repos that waited for this one wait for `holder` too.
   */
  defer(did: string, holder: string, rev?: string): void {
    const events = this.held.get(did) ?? []
    const keep = rev === undefined ? events : events.filter((evt) => newerThan(evt, rev))
    if (keep.length < events.length) {
      heldTotal.inc({ outcome: 'covered' }, events.length - keep.length)
      this.count -= events.length - keep.length
      heldNow.set(this.count)
    }
    this.held.set(did, keep)
    if (rev !== undefined) this.coveredTo.set(did, rev)
    let waiting = this.waiting.get(holder)
    if (!waiting) this.waiting.set(holder, (waiting = new Set()))
    for (const waiter of this.waiting.get(did) ?? []) {
      this.waitsFor.set(waiter, holder)
      waiting.add(waiter)
    }
    this.waiting.delete(did)
    this.waitsFor.set(did, holder)
    waiting.add(did)
    this.refersTo.delete(did)
    this.overflowed.delete(did)
    this.version++
  }

  /** The held repo a post of another repo refers to, if any (the one being fetched). */
  private holderOf(evt: IngestEvent): string | undefined {
    if (!this.held.size) return undefined
    for (const did of referencedRepos(evt)) {
      if (did === evt.did || !this.held.has(did)) continue
      return this.waitsFor.get(did) ?? did
    }
    return undefined
  }

  private checkBounds(did: string, length: number): void {
    const bound =
      length > this.limits.perRepo ? 'repo' : this.count > this.limits.total ? 'total' : undefined
    // A repo that waits for another is let go with it: that one's fetch is given up.
    const target = this.waitsFor.get(did) ?? did
    if (!bound || this.overflowed.has(target)) return
    this.overflowed.add(target)
    overflows.inc({ bound })
    for (const listener of this.overflowListeners) listener(target)
  }
}

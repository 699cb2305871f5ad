// A page of one bsync stream folded, in order, into the net row changes of each table it touches:
// what the stock's consumer leaves after applying the operations one by one, written by
// `apply.ts` with one statement per table and kind. Pure: the rows a fold must know beforehand
// (those an insert could collide with) are loaded by `reads.ts` and handed in.
import type { Selectable } from 'kysely'
import type {
  ActivitySubscription,
  ActorState,
  Bookmark,
  Draft,
  ListMute,
  Mute,
  PrivateData,
  ThreadMute,
} from '@openplane/db'
import type { AgePatch, MuteChange, PrivateOp } from './ops.ts'

// Rows as the stock's tables hold them.
export type MuteRow = Selectable<Mute>
export type ListMuteRow = ListMute
export type ThreadMuteRow = ThreadMute
export type PriorityRow = Selectable<ActorState>
export type PrivateDataRow = PrivateData
export type BookmarkRow = Bookmark
export type ActivitySubscriptionRow = ActivitySubscription
export type DraftRow = Draft

/** Strictly increasing ISO timestamps, one per operation, as the stock's one-by-one `now` reads. */
export class Clock {
  #last = 0
  next(): string {
    this.#last = Math.max(Date.now(), this.#last + 1)
    return new Date(this.#last).toISOString()
  }
}

/**
 * Upserts keyed by a string, where a removal in the page is remembered: a key removed and then put
 * again is deleted and inserted afresh (its `createdAt` is the new one), while a key only put keeps
 * an existing row's creation fields (the stock's `on conflict do update` of some columns).
 */
export class Upserts<R> {
  readonly removed = new Set<string>()
  readonly rows = new Map<string, R>()

  put(key: string, row: R, merge?: (prev: R, next: R) => R): void {
    const prev = this.rows.get(key)
    this.rows.set(key, prev && merge ? merge(prev, row) : row)
  }

  remove(key: string): void {
    this.rows.delete(key)
    this.removed.add(key)
  }

  /** Drops pending puts matching `pred` (a clear of the actor's mutes covers them). */
  drop(pred: (row: R) => boolean): void {
    for (const [key, row] of this.rows) if (pred(row)) this.rows.delete(key)
  }
}

export interface MutePlan {
  /** Actors whose account and list mutes were cleared: deleted before the rest. */
  cleared: Set<string>
  mute: Upserts<MuteRow>
  listMute: Upserts<ListMuteRow>
  threadMute: Upserts<ThreadMuteRow>
}

const key2 = (a: string, b: string) => `${a}\u0000${b}`

export function planMutes(changes: MuteChange[], clock: Clock): MutePlan {
  const plan: MutePlan = {
    cleared: new Set(),
    mute: new Upserts(),
    listMute: new Upserts(),
    threadMute: new Upserts(),
  }
  for (const c of changes) {
    const now = clock.next()
    if (c.kind === 'clear') {
      // The stock clears account and list mutes, not thread mutes.
      plan.cleared.add(c.actor)
      plan.mute.drop((r) => r.mutedByDid === c.actor)
      plan.listMute.drop((r) => r.mutedByDid === c.actor)
      continue
    }
    const k = key2(c.actor, c.subject)
    if (c.table === 'mute') {
      if (c.kind === 'remove') plan.mute.remove(k)
      else {
        const row = {
          mutedByDid: c.actor,
          subjectDid: c.subject,
          createdAt: now,
          onlyReposts: c.onlyReposts,
          onlyQuoteposts: c.onlyQuoteposts,
        }
        // A second add in the page keeps the first one's createdAt and takes the new flags.
        plan.mute.put(k, row, (prev, next) => ({ ...next, createdAt: prev.createdAt }))
      }
    } else if (c.table === 'list_mute') {
      if (c.kind === 'remove') plan.listMute.remove(k)
      else
        plan.listMute.put(k, { mutedByDid: c.actor, listUri: c.subject, createdAt: now }, (p) => p)
    } else {
      if (c.kind === 'remove') plan.threadMute.remove(k)
      else
        plan.threadMute.put(
          k,
          { mutedByDid: c.actor, rootUri: c.subject, createdAt: now },
          (p) => p,
        )
    }
  }
  return plan
}

/** Per actor, the last priority setting (lastSeenNotifs only for an actor_state row made here). */
export function planNotifs(
  changes: ({ actor: string; priority: boolean } | undefined)[],
  clock: Clock,
): Map<string, PriorityRow> {
  const out = new Map<string, PriorityRow>()
  for (const c of changes) {
    const now = clock.next()
    if (!c) continue
    const prev = out.get(c.actor)
    out.set(c.actor, {
      did: c.actor,
      priorityNotifs: c.priority,
      lastSeenNotifs: prev?.lastSeenNotifs ?? now,
    })
  }
  return out
}

/**
 * Rows of a table with a primary key and other unique keys, as loaded and as the page leaves
 * them. An insert into a taken slot is refused, as the stock's plain insert fails there (and its
 * consumer logs and moves on).
 */
export class TableFold<R> {
  readonly #loaded = new Map<string, R>()
  readonly #rows = new Map<string, R>()
  readonly #unique: Map<string, string>[]
  readonly #touched = new Set<string>()
  readonly pk: (r: R) => string
  readonly uniques: ((r: R) => string)[]

  constructor(pk: (r: R) => string, uniques: ((r: R) => string)[] = []) {
    this.pk = pk
    this.uniques = uniques
    this.#unique = uniques.map(() => new Map())
  }

  load(rows: Iterable<R>): void {
    for (const r of rows) {
      this.#loaded.set(this.pk(r), r)
      this.#set(r)
    }
  }

  get(key: string): R | undefined {
    return this.#rows.get(key)
  }

  insert(row: R): boolean {
    const k = this.pk(row)
    if (this.#rows.has(k)) return false
    if (this.uniques.some((u, i) => this.#unique[i]!.has(u(row)))) return false
    this.#set(row)
    this.#touched.add(k)
    return true
  }

  update(key: string, patch: Partial<R>): boolean {
    const prev = this.#rows.get(key)
    if (!prev) return false
    this.#delete(key)
    this.#set({ ...prev, ...patch })
    this.#touched.add(key)
    return true
  }

  delete(key: string): R | undefined {
    const prev = this.#rows.get(key)
    if (prev) this.#delete(key)
    this.#touched.add(key)
    return prev
  }

  /** Rows to delete (by primary key) first, then rows to upsert. */
  changes(): { deletes: R[]; upserts: R[] } {
    const deletes: R[] = []
    const upserts: R[] = []
    for (const k of this.#touched) {
      const now = this.#rows.get(k)
      const was = this.#loaded.get(k)
      if (!now && was) deletes.push(was)
      if (now && now !== was) upserts.push(now)
    }
    return { deletes, upserts }
  }

  #set(r: R): void {
    const k = this.pk(r)
    this.#rows.set(k, r)
    this.uniques.forEach((u, i) => this.#unique[i]!.set(u(r), k))
  }

  #delete(k: string): void {
    const r = this.#rows.get(k)!
    this.#rows.delete(k)
    this.uniques.forEach((u, i) => this.#unique[i]!.delete(u(r)))
  }
}

export const byCreatorKey = (r: { creator: string; key: string }) => key2(r.creator, r.key)

export interface Loaded {
  bookmark: BookmarkRow[]
  activitySubscription: ActivitySubscriptionRow[]
  draft: DraftRow[]
}

export interface OperationPlan {
  privateData: Upserts<PrivateDataRow>
  bookmark: TableFold<BookmarkRow>
  activitySubscription: TableFold<ActivitySubscriptionRow>
  draft: TableFold<DraftRow>
  /** Subjects whose bookmark count changes. */
  bookmarked: Set<string>
  /** Per actor, the age-assurance columns the page sets (later events over earlier ones). */
  ageAssurance: Map<string, AgePatch>
  /** Operations whose namespace table refused them (the stock's insert would have failed). */
  refused: { op: PrivateOp; reason: string }[]
}

export function newFolds(loaded: Loaded) {
  const bookmark = new TableFold<BookmarkRow>(byCreatorKey, [(r) => key2(r.subjectUri, r.creator)])
  const activitySubscription = new TableFold<ActivitySubscriptionRow>(byCreatorKey, [
    (r) => key2(r.creator, r.subjectDid),
  ])
  const draft = new TableFold<DraftRow>(byCreatorKey)
  bookmark.load(loaded.bookmark)
  activitySubscription.load(loaded.activitySubscription)
  draft.load(loaded.draft)
  return { bookmark, activitySubscription, draft }
}

export function planOperations(ops: PrivateOp[], loaded: Loaded, clock: Clock): OperationPlan {
  const plan: OperationPlan = {
    privateData: new Upserts(),
    ...newFolds(loaded),
    bookmarked: new Set(),
    ageAssurance: new Map(),
    refused: [],
  }
  for (const op of ops) {
    const now = clock.next()
    const pk = key2(op.actor, `${op.namespace}\u0000${op.key}`)
    if (op.put.method === 'delete') plan.privateData.remove(pk)
    else {
      const row = {
        actorDid: op.actor,
        namespace: op.namespace,
        key: op.key,
        payload: op.put.payload,
        indexedAt: now,
        updatedAt: now,
      }
      plan.privateData.put(pk, row, (prev, next) => ({ ...next, indexedAt: prev.indexedAt }))
    }
    const refusal = foldIndexed(plan, op, now)
    if (refusal) plan.refused.push({ op, reason: refusal })
  }
  return plan
}

/** The namespace's own table; returns why the stock would have refused the operation, if so. */
function foldIndexed(plan: OperationPlan, op: PrivateOp, now: string): string | undefined {
  const ix = op.indexed
  if (!ix) return undefined
  const key = key2(op.actor, op.key)
  switch (ix.ns) {
    case 'bookmark': {
      if (ix.put === 'create') {
        const row = {
          creator: op.actor,
          key: op.key,
          subjectUri: ix.subjectUri,
          subjectCid: ix.subjectCid,
          indexedAt: now,
        }
        if (!plan.bookmark.insert(row)) return 'bookmark exists'
        plan.bookmarked.add(ix.subjectUri)
      } else if (ix.put === 'delete') {
        const gone = plan.bookmark.delete(key)
        if (gone) plan.bookmarked.add(gone.subjectUri)
      }
      return undefined
    }
    case 'activitySubscription': {
      if (ix.put === 'delete') plan.activitySubscription.delete(key)
      else if (ix.put === 'create') {
        const row = {
          creator: op.actor,
          key: op.key,
          subjectDid: ix.subjectDid,
          indexedAt: now,
          post: ix.post,
          reply: ix.reply,
        }
        if (!plan.activitySubscription.insert(row)) return 'activity subscription exists'
      } else
        plan.activitySubscription.update(key, { indexedAt: now, post: ix.post, reply: ix.reply })
      return undefined
    }
    case 'draft': {
      if (ix.put === 'delete') plan.draft.delete(key)
      else if (ix.put === 'create') {
        const row = {
          creator: op.actor,
          key: op.key,
          createdAt: now,
          updatedAt: now,
          payload: ix.payload,
        }
        if (!plan.draft.insert(row)) return 'draft exists'
      } else plan.draft.update(key, { updatedAt: now, payload: ix.payload })
      return undefined
    }
    case 'ageAssurance': {
      plan.ageAssurance.set(op.actor, { ...plan.ageAssurance.get(op.actor), ...ix.patch })
      return undefined
    }
  }
}

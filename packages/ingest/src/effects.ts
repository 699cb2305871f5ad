// Applies plugin effects inside the batch transaction. Counter deltas are summed over the batch
// and written once per key at the end, so a hot post liked 500 times in a batch is one upsert.
import { sql, type Kysely } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'
import type { Counter, Effects, NotificationRow, RowWrite } from '@openplane/plugins'
import type { ChangeLog, FeedItemValues } from './changes.ts'

type Db = Kysely<DatabaseSchema>

export class CounterBuffer {
  private deltas = new Map<string, Counter>()

  /** For savepoint rollbacks: buffers are not in the database, so they roll back by hand. */
  snapshot(): () => void {
    const copy = new Map(this.deltas)
    return () => (this.deltas = copy)
  }

  add(counters: Counter[] | undefined): void {
    for (const c of counters ?? []) {
      const id = `${c.table}\u0000${c.column}\u0000${c.key}`
      const prev = this.deltas.get(id)
      this.deltas.set(id, prev ? ({ ...prev, delta: prev.delta + c.delta } as Counter) : { ...c })
    }
  }

  /** Writes every summed delta. Zero sums still create the row, as the stock's recount would. */
  async flush(db: Db): Promise<void> {
    const groups = new Map<string, Counter[]>()
    for (const c of this.deltas.values()) {
      const g = `${c.table}.${c.column}`
      groups.set(g, [...(groups.get(g) ?? []), c])
    }
    this.deltas.clear()
    for (const list of groups.values()) {
      const { table, column } = list[0]!
      const keyCol = table === 'post_agg' ? 'uri' : 'did'
      const col = sql.ref(column)
      const rows = sql.join(list.map((c) => sql`(${c.key}, ${c.delta}::bigint)`))
      await sql`
        insert into ${sql.table(table)} (${sql.ref(keyCol)}, ${col}) values ${rows}
        on conflict (${sql.ref(keyCol)})
        do update set ${col} = ${sql.table(table)}.${col} + excluded.${col}
      `.execute(db)
    }
  }
}

export async function applyRows(
  db: Db,
  rows: RowWrite[] | undefined,
  changes?: ChangeLog,
): Promise<void> {
  const list = rows ?? []
  for (let i = 0; i < list.length; i++) {
    const row = list[i]!
    if (row.kind === 'insert' && !row.onConflict) {
      // Adjacent "insert, leave existing rows alone" writes to one table go out as one statement.
      const values: unknown[] = [row.values]
      while (values.length < 1000) {
        const next = list[i + 1]
        if (next?.kind !== 'insert' || next.onConflict || next.table !== row.table) break
        values.push(next.values)
        i++
      }
      const q = db
        .insertInto(row.table)
        .values(values as never)
        .onConflict((b) => b.doNothing())
      if (changes && row.table === 'feed_item') {
        // Only items really written are fanned out: one that outlived its post (an account
        // deletion leaves feed items) keeps its place, and the new one is not written.
        const added = (await q.returningAll().execute()) as FeedItemValues[]
        for (const item of added) changes.add({ table: 'feed_item', op: 'insert', row: item })
      } else {
        await q.execute()
      }
    } else if (row.kind === 'insert') {
      const q = db.insertInto(row.table).values(row.values as never)
      const oc = row.onConflict
      await (
        oc
          ? q.onConflict((b) =>
              b
                .columns(oc.columns as never)
                .doUpdateSet(
                  Object.fromEntries(oc.update.map((c) => [c, sql.ref(`excluded.${c}`)])) as never,
                ),
            )
          : q.onConflict((b) => b.doNothing())
      ).execute()
    } else if (row.kind === 'delete') {
      let q = db.deleteFrom(row.table)
      for (const [k, v] of Object.entries(row.where)) q = q.where(k as never, '=', v as never)
      if (changes && row.table === 'feed_item') {
        // The removed rows themselves: a post's deletion also takes its reposts' items, whose
        // originators (and so whose timelines) only the rows tell.
        const gone = (await q.returningAll().execute()) as FeedItemValues[]
        for (const item of gone) changes.add({ table: 'feed_item', op: 'delete', row: item })
      } else {
        await q.execute()
      }
    } else {
      let q = db.updateTable(row.table).set(row.set as never)
      for (const [k, v] of Object.entries(row.where)) q = q.where(k as never, '=', v as never)
      await q.execute()
    }
  }
}

/**
 * Notifications of a batch, inserted together at its end. A deletion removes matching rows now
 * and drops matching buffered ones, so "create then delete" inside one batch leaves nothing.
 */
export class NotificationBuffer {
  private pending: NotificationRow[] = []

  snapshot(): () => void {
    const copy = [...this.pending]
    return () => (this.pending = copy)
  }

  async apply(db: Db, deleteFor: string[] | undefined, add: NotificationRow[] | undefined) {
    if (deleteFor?.length) {
      await db.deleteFrom('notification').where('recordUri', 'in', deleteFor).execute()
      const gone = new Set(deleteFor)
      this.pending = this.pending.filter((n) => !gone.has(n.recordUri))
    }
    if (add?.length) this.pending.push(...add)
  }

  /** Drops buffered notifications by or to an account (its deletion removed the stored ones). */
  dropInvolving(did: string): void {
    this.pending = this.pending.filter((n) => n.did !== did && n.author !== did)
  }

  async flush(db: Db): Promise<void> {
    const all = this.pending
    this.pending = []
    if (!all.length) return
    const kept = await withoutThreadMutes(db, all)
    for (let i = 0; i < kept.length; i += 1000) {
      await db
        .insertInto('notification')
        .values(kept.slice(i, i + 1000))
        .execute()
    }
  }
}

// A recipient who muted a thread gets no notifications about posts in it (the stock's rule).
async function withoutThreadMutes(db: Db, notifs: NotificationRow[]): Promise<NotificationRow[]> {
  const subjects = [
    ...new Set(
      notifs.map((n) => n.reasonSubject).filter((s): s is string => !!s && !s.startsWith('did:')),
    ),
  ]
  if (!subjects.length) return notifs
  const posts = await db
    .selectFrom('post')
    .select(['uri', 'replyRoot'])
    .where('uri', 'in', subjects)
    .execute()
  const rootOf = new Map(posts.map((p) => [p.uri, p.replyRoot ?? p.uri]))
  const pairs = notifs
    .map((n) => (n.reasonSubject ? rootOf.get(n.reasonSubject) : undefined))
    .filter((r): r is string => !!r)
  if (!pairs.length) return notifs
  const mutes = await db
    .selectFrom('thread_mute')
    .select(['rootUri', 'mutedByDid'])
    .where('rootUri', 'in', [...new Set(pairs)])
    .where(
      'mutedByDid',
      'in',
      notifs.map((n) => n.did),
    )
    .execute()
  if (!mutes.length) return notifs
  const muted = new Set(mutes.map((m) => `${m.rootUri} ${m.mutedByDid}`))
  return notifs.filter((n) => {
    const root = n.reasonSubject ? rootOf.get(n.reasonSubject) : undefined
    return !root || !muted.has(`${root} ${n.did}`)
  })
}

export function mergeEffects(...all: (Effects | undefined)[]): Effects {
  const out: Required<Effects> = {
    rows: [],
    counters: [],
    notifications: [],
    deleteNotificationsFor: [],
  }
  for (const e of all) {
    if (!e) continue
    out.rows.push(...(e.rows ?? []))
    out.counters.push(...(e.counters ?? []))
    out.notifications.push(...(e.notifications ?? []))
    out.deleteNotificationsFor.push(...(e.deleteNotificationsFor ?? []))
  }
  return out
}

// A batch's plan: the row changes (in the batch state), counter deltas, notification changes,
// last commits seen, and the metrics and logs to emit once it commits. Everything in it can be
// rolled back to a mark, so a step that missed a read, or failed, leaves no trace.
import type { Counter, Effects, NotificationRow, RowWrite } from '@openplane/plugins'
import type { Applied } from './applied.ts'
import type { BatchState, Where } from './state.ts'

export type NotificationOp = { add: NotificationRow } | { drop: string[] }

export interface Mark {
  state: number
  counters: number
  notifications: number
  seen: number
  later: number
  applied: number
}

export class Plan {
  readonly state: BatchState
  readonly counters: Counter[] = []
  readonly notifications: NotificationOp[] = []
  /** The last commit per repo, in firehose order (the last one wins). */
  readonly seen: { did: string; commit: string; rev: string }[] = []
  /** Metrics and logs, emitted only once the batch commits. */
  readonly later: (() => void)[] = []
  /** The events applied, in firehose order, for the published-event log (publish.ts). */
  readonly applied: Applied[] = []

  constructor(state: BatchState) {
    this.state = state
  }

  mark(): Mark {
    return {
      state: this.state.mark(),
      counters: this.counters.length,
      notifications: this.notifications.length,
      seen: this.seen.length,
      later: this.later.length,
      applied: this.applied.length,
    }
  }

  rollback(mark: Mark): void {
    this.state.rollback(mark.state)
    this.counters.length = mark.counters
    this.notifications.length = mark.notifications
    this.seen.length = mark.seen
    this.later.length = mark.later
    this.applied.length = mark.applied
  }

  /** A plugin's effects; `notify: false` keeps its notifications out (an update's insert side). */
  apply(effects: Effects, notify = true): void {
    this.applyRows(effects.rows)
    if (effects.counters) this.counters.push(...effects.counters)
    if (!notify) return
    if (effects.deleteNotificationsFor?.length) {
      this.notifications.push({ drop: effects.deleteNotificationsFor })
    }
    for (const add of effects.notifications ?? []) this.notifications.push({ add })
  }

  applyRows(rows: RowWrite[] | undefined): void {
    for (const row of rows ?? []) {
      if (row.kind === 'insert') this.state.insertIfFree(row.table, row.values)
      else if (row.kind === 'delete') this.state.delete(row.table, row.where as Where)
      else this.state.update(row.table, row.where as Where, row.set)
    }
  }

  /**
   * The notifications to store and the records whose stored ones go: a drop removes the earlier
   * planned ones of its records too, so "create then delete" in one batch leaves nothing. A
   * recipient who muted the thread a notification is about gets none (the stock's rule), judged
   * on the thread as the batch leaves it. Reads the state: may miss.
   */
  notificationsToWrite(): { drop: string[]; add: NotificationRow[] } {
    const pending: (NotificationRow | null)[] = []
    const byRecord = new Map<string, number[]>()
    const drop = new Set<string>()
    for (const op of this.notifications) {
      if ('add' in op) {
        const at = byRecord.get(op.add.recordUri)
        if (at) at.push(pending.length)
        else byRecord.set(op.add.recordUri, [pending.length])
        pending.push(op.add)
        continue
      }
      for (const uri of op.drop) {
        drop.add(uri)
        for (const i of byRecord.get(uri) ?? []) pending[i] = null
        byRecord.delete(uri)
      }
    }
    const add = pending.filter((n): n is NotificationRow => n !== null && !this.muted(n))
    return { drop: [...drop], add }
  }

  private muted(n: NotificationRow): boolean {
    const subject = n.reasonSubject
    if (!subject || subject.startsWith('did:')) return false
    // The post's own row is all it takes: its thread above is not loaded for this.
    const post = this.state.alone('post', subject)
    if (!post) return false
    const rootUri = (post.replyRoot as string | null) ?? (post.uri as string)
    return this.state.has('thread_mute', { rootUri, mutedByDid: n.did })
  }
}

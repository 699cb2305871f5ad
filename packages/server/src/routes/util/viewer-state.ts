// What one actor did to a batch of subjects: liked, reposted, bookmarked, muted the thread. The
// AppView asks all four for every page of posts, at once, as four rpcs; the reads of one turn by
// the same actor run as one statement (turn-batch.ts), a branch per kind asked for, each branch
// the index scan its rpc ran alone.
import { sql, type Kysely, type RawBuilder } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'
import { TurnBatch } from './turn-batch.ts'

export type ViewerKind = 'like' | 'repost' | 'bookmark' | 'threadMute'

/** A row of the actor's, by the subject it is on: the record's uri (likes, reposts) or, for
 * bookmarks, the stash key with the subject's cid and when it was indexed. */
export interface ViewerRow {
  subject: string
  value: string | null
  cid: string | null
  indexedAt: string | null
}

interface ViewerRead {
  actor: string
  kind: ViewerKind
  subjects: readonly string[]
}

const KINDS: readonly ViewerKind[] = ['like', 'repost', 'bookmark', 'threadMute']

const batches = new WeakMap<Kysely<DatabaseSchema>, TurnBatch<ViewerRead, Map<string, ViewerRow>>>()

/**
 * The actor's rows of `kind` on `subjects`, by subject. When two rows are on one subject, the
 * last the scan returned is kept, as the single-kind reads kept it.
 */
export function viewerRows(
  db: Kysely<DatabaseSchema>,
  actor: string,
  kind: ViewerKind,
  subjects: readonly string[],
): Promise<Map<string, ViewerRow>> {
  let batch = batches.get(db)
  if (!batch) {
    batch = new TurnBatch('viewer_state', (reads) => readViewerRows(db, reads))
    batches.set(db, batch)
  }
  // Batched by actor: every read in a batch is by the same one.
  return batch.add(actor, { actor, kind, subjects })
}

async function readViewerRows(
  db: Kysely<DatabaseSchema>,
  reads: ViewerRead[],
): Promise<Map<string, ViewerRow>[]> {
  const actor = (reads[0] as ViewerRead).actor
  const subjects = new Map<ViewerKind, Set<string>>()
  for (const read of reads) {
    const set = subjects.get(read.kind) ?? new Set<string>()
    for (const subject of read.subjects) set.add(subject)
    subjects.set(read.kind, set)
  }
  const branches: RawBuilder<unknown>[] = []
  for (const kind of KINDS) {
    const set = subjects.get(kind)
    if (set) branches.push(branch(kind, actor, [...set]))
  }
  const { rows } = await sql<
    ViewerRow & { kind: number }
  >`${sql.join(branches, sql` union all `)}`.execute(db)
  const byKind = new Map<ViewerKind, Map<string, ViewerRow>>(KINDS.map((kind) => [kind, new Map()]))
  for (const row of rows) byKind.get(KINDS[row.kind] as ViewerKind)?.set(row.subject, row)
  return reads.map((read) => byKind.get(read.kind) as Map<string, ViewerRow>)
}

/** One kind's index scan, its rows tagged with the kind's position in KINDS. */
function branch(kind: ViewerKind, actor: string, subjects: string[]): RawBuilder<unknown> {
  const tag = sql.lit(KINDS.indexOf(kind))
  switch (kind) {
    case 'like':
    case 'repost':
      return sql`select ${tag} as kind, subject, uri as value, null::text as cid, null::text as "indexedAt"
        from ${sql.table(kind)} where creator = ${actor} and subject = any(${subjects}::text[])`
    case 'bookmark':
      return sql`select ${tag} as kind, "subjectUri" as subject, key as value, "subjectCid" as cid, "indexedAt"::text as "indexedAt"
        from bookmark where creator = ${actor} and "subjectUri" = any(${subjects}::text[])`
    case 'threadMute':
      return sql`select ${tag} as kind, "rootUri" as subject, null::text as value, null::text as cid, null::text as "indexedAt"
        from thread_mute where "mutedByDid" = ${actor} and "rootUri" = any(${subjects}::text[])`
  }
}

// Writing a batch of checked labels: per (src, uri, cid, val) the newest by `cts` wins, whether it
// is a label or its negation. A negation is kept as a row with `neg` (GetLabels leaves it out), so
// a label older than a negation that came first never comes back, and one newer than it does.
import { sql, type Kysely } from 'kysely'
import { saveStreamCursor, type DatabaseSchema } from '@openplane/db'
import type { LabelRow } from './label.ts'

const keyOf = (r: LabelRow) => `${r.src}\u0000${r.uri}\u0000${r.cid}\u0000${r.val}`

/** One row per key: the newest (the later in the stream on a tie). */
export function newestPerKey(rows: LabelRow[]): LabelRow[] {
  const out = new Map<string, LabelRow>()
  for (const r of rows) {
    const prev = out.get(keyOf(r))
    if (!prev || Date.parse(r.cts) >= Date.parse(prev.cts)) out.set(keyOf(r), r)
  }
  return [...out.values()]
}

/** The labels and the labeler's cursor, in one transaction. */
export async function applyLabels(
  db: Kysely<DatabaseSchema>,
  rows: LabelRow[],
  stream: string,
  cursor: number,
): Promise<void> {
  await db.transaction().execute(async (tx) => {
    const newest = newestPerKey(rows)
    if (newest.length) {
      await tx
        .insertInto('label')
        .values(newest)
        .onConflict((oc) =>
          oc
            .columns(['src', 'uri', 'cid', 'val'])
            .doUpdateSet({
              neg: sql.ref('excluded.neg') as never,
              cts: sql.ref('excluded.cts') as never,
              exp: sql.ref('excluded.exp') as never,
            })
            // An older label or negation than the one stored changes nothing.
            .where(sql<boolean>`excluded.cts::timestamptz >= label.cts::timestamptz`),
        )
        .execute()
    }
    await saveStreamCursor(tx, stream, String(cursor))
  })
}

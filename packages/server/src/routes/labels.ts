// Labels: unexpired labels on the given subjects from the given labelers, as the JSON label
// objects the AppView decodes; and the indexed labeler services. Negations stored as rows with
// `neg` (so an older copy of a label arriving later stays negated) are answered as the stock
// answers such rows; the AppView drops them.
import { sql } from 'kysely'
import { anyOf, type Label } from '@openplane/db'
import type { RouteContext, Routes } from './context.ts'
import { getRecords } from './util/records.ts'
import { TurnBatch } from './util/turn-batch.ts'

export default (ctx: RouteContext): Routes => {
  // A page asks for its posts' labels and its authors' in the same turn, from the same labelers:
  // one statement answers both (util/turn-batch.ts).
  const batch = new TurnBatch('labels', (reads: LabelRead[]) => readLabels(ctx, reads))
  return {
    async getLabels(req) {
      const { subjects, issuers } = req
      if (subjects.length === 0 || issuers.length === 0) return { labels: [] }
      const unique = [...new Set(issuers)]
      const bySubject = await batch.add(unique.sort().join(' '), { subjects, issuers: unique })
      // A subject asked for twice gets its labels twice, as from the stock; the AppView copes.
      const labels = subjects.flatMap((subject) =>
        (bySubject.get(subject) ?? []).map((label) => Buffer.from(labelJson(label), 'utf8')),
      )
      return { labels }
    },

    // The stock throws "not implemented" here (the AppView never calls it); answering is harmless
    // and lets operators list labelers. Newest first, each with its service record.
    async getAllLabelers() {
      const rows = await ctx.db
        .selectFrom('labeler')
        .select('uri')
        .orderBy('sortAt', 'desc')
        .orderBy('cid', 'desc')
        .execute()
      const uris = rows.map((row) => row.uri)
      return { uris, records: await getRecords(ctx.db, uris) }
    },
  }
}

interface LabelRead {
  subjects: readonly string[]
  /** Unique; the same set for every read of a batch. */
  issuers: readonly string[]
}

/** Unexpired labels on the reads' subjects from their labelers, by subject (shared by all). */
async function readLabels(ctx: RouteContext, reads: LabelRead[]): Promise<Map<string, Label[]>[]> {
  const subjects = new Set<string>()
  for (const read of reads) for (const subject of read.subjects) subjects.add(subject)
  const rows = await ctx.db
    .selectFrom('label')
    .where('uri', '=', anyOf([...subjects]))
    .where('src', '=', anyOf((reads[0] as LabelRead).issuers))
    .where((eb) => eb.or([eb('exp', 'is', null), sql<boolean>`exp::timestamp > now()`]))
    .select(['src', 'uri', 'cid', 'val', 'neg', 'cts', 'exp'])
    .execute()
  const bySubject = new Map<string, Label[]>()
  for (const row of rows) {
    const list = bySubject.get(row.uri) ?? []
    list.push(row)
    bySubject.set(row.uri, list)
  }
  return reads.map(() => bySubject)
}

// The stock's shape: columns in table order, with an empty cid, a false neg and a null exp left out.
function labelJson(label: Label): string {
  return JSON.stringify({
    src: label.src,
    uri: label.uri,
    cid: label.cid === '' ? undefined : label.cid,
    val: label.val,
    neg: label.neg === true ? true : undefined,
    cts: label.cts,
    exp: label.exp ?? undefined,
  })
}

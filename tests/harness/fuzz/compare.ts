// What the fuzzer compares after a sequence: every indexed table against the stock's (counters
// against the stock's rows recounted), the follow graph against our `follow` table, and each
// account's fanned-out timeline against the stock dataplane's GetTimeline.
import { decodeMember, memberUris } from '@openplane/timelines'
import { diffSchemas, INDEXED_TABLES } from '../indexer.ts'
import type { OurRun } from './ours.ts'
import { fuzzPool } from './schema.ts'
import { ACCOUNTS, didOf } from './sequence.ts'
import type { StockClient } from './stock.ts'

export type DifferenceKind = 'table' | 'counter' | 'graph' | 'timeline'

export interface Difference {
  kind: DifferenceKind
  detail: string
}

export async function compareTables(stock: string, ours: string): Promise<Difference[]> {
  return (await diffSchemas(stock, ours, INDEXED_TABLES)).map((detail) => ({
    kind: 'table',
    detail,
  }))
}

export async function compareGraph(ours: string, run: OurRun): Promise<Difference[]> {
  const { rows } = await fuzzPool().query<{ creator: string; subjectDid: string }>(
    `select distinct creator, "subjectDid" from "${ours}".follow`,
  )
  const table = new Set(rows.map((r) => `${r.creator} ${r.subjectDid}`))
  const out: Difference[] = []
  for (const a of ACCOUNTS) {
    for (const b of ACCOUNTS) {
      const inTable = table.has(`${didOf(a)} ${didOf(b)}`)
      const inGraph = run.graph.isFollowing(didOf(a), didOf(b))
      if (inTable !== inGraph) {
        out.push({
          kind: 'graph',
          detail: `${a} follows ${b}: follow table ${inTable}, graph ${inGraph}`,
        })
      }
    }
  }
  if (run.graph.edgeCount !== table.size) {
    out.push({
      kind: 'graph',
      detail: `graph holds ${run.graph.edgeCount} edges, the follow table ${table.size} pairs`,
    })
  }
  return out
}

/**
 * Items with the same (sortAt, cid) (two reposts of one post in one commit are the same record)
 * have no defined order in the stock's query: within such a tie, compare by uri.
 */
function untied(items: { key: string; text: string }[]): string[] {
  return items
    .map((item, i) => ({ ...item, i }))
    .sort((x, y) => (x.key === y.key ? (x.text < y.text ? -1 : 1) : x.i - y.i))
    .map((item) => item.text)
}

export async function compareTimelines(
  stock: StockClient,
  stockSchema: string,
  run: OurRun,
): Promise<Difference[]> {
  const { rows } = await fuzzPool().query<{ uri: string; sortAt: string; cid: string }>(
    `select uri, "sortAt", cid from "${stockSchema}".feed_item`,
  )
  const keyOf = new Map(rows.map((r) => [r.uri, `${r.sortAt} ${r.cid}`]))
  const out: Difference[] = []
  for (const a of ACCOUNTS) {
    const did = didOf(a)
    const want = untied(
      (await stock.getTimeline({ actorDid: did, limit: 100 })).items.map((i) => ({
        key: keyOf.get(i.repost || i.uri) ?? '',
        text: `${i.uri} ${i.repost}`,
      })),
    )
    const page = await run.home.page(did, 100, undefined)
    if (!page) {
      out.push({ kind: 'timeline', detail: `${a}'s timeline was not served from the store` })
      continue
    }
    const have = untied(
      page.members.map((m) => {
        // The key from the member, the text as GetTimeline answers it.
        const { sortAt, cid } = decodeMember(m)
        const { uri, repost } = memberUris(m)
        return { key: `${sortAt} ${cid}`, text: `${uri} ${repost}` }
      }),
    )
    if (JSON.stringify(want) !== JSON.stringify(have)) {
      out.push({
        kind: 'timeline',
        detail: `${a}'s timeline differs\n  stock: ${want.join('\n         ')}\n  ours:  ${have.join('\n         ')}`,
      })
    }
  }
  return out
}

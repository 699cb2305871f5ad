// What the fuzzer compares after a sequence: every indexed table against the stock's (counters
// against the stock's rows recounted), the follow graph against our `follow` table, and each
// account's fanned-out timeline against the stock dataplane's GetTimeline.
import { diffSchemas, INDEXED_TABLES } from '../indexer.ts'
import type { OurRun } from './ours.ts'
import { aggRows, fuzzPool } from './schema.ts'
import { ACCOUNTS, didOf } from './sequence.ts'
import type { StockClient } from './stock.ts'

export type DifferenceKind = 'table' | 'counter' | 'graph' | 'timeline'

export interface Difference {
  kind: DifferenceKind
  detail: string
}

const AGG = ['post_agg', 'profile_agg'] as const

export async function compareTables(stock: string, ours: string): Promise<Difference[]> {
  const plain = INDEXED_TABLES.filter((t) => !(AGG as readonly string[]).includes(t))
  const out: Difference[] = (await diffSchemas(stock, ours, plain)).map((detail) => ({
    kind: 'table',
    detail,
  }))
  for (const table of AGG) {
    const [want, have] = await Promise.all([
      aggRows(stock, table, 'recounted'),
      aggRows(ours, table, 'stored'),
    ])
    const onlyStock = want.filter((r) => !have.includes(r))
    const onlyOurs = have.filter((r) => !want.includes(r))
    if (onlyStock.length || onlyOurs.length) {
      out.push({
        kind: 'table',
        detail:
          `${table} (stock recounted vs ours): ${onlyStock.length} only in the stock, ` +
          `${onlyOurs.length} only in ours\n` +
          [...onlyStock.map((r) => `  - ${r}`), ...onlyOurs.map((r) => `  + ${r}`)].join('\n'),
      })
    }
  }
  return out
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

export async function compareTimelines(stock: StockClient, run: OurRun): Promise<Difference[]> {
  const out: Difference[] = []
  for (const a of ACCOUNTS) {
    const did = didOf(a)
    const want = (await stock.getTimeline({ actorDid: did, limit: 100 })).items.map(
      (i) => `${i.uri} ${i.repost}`,
    )
    const page = await run.home.read(did, 100, undefined)
    if (!page) {
      out.push({ kind: 'timeline', detail: `${a}'s timeline was not served from the store` })
      continue
    }
    const have = page.items.map((i) => `${i.postUri} ${i.uri === i.postUri ? '' : i.uri}`)
    if (JSON.stringify(want) !== JSON.stringify(have)) {
      out.push({
        kind: 'timeline',
        detail: `${a}'s timeline differs\n  stock: ${want.join('\n         ')}\n  ours:  ${have.join('\n         ')}`,
      })
    }
  }
  return out
}

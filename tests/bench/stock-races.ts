// The stock indexer runs repos in parallel, so an event can be indexed before one in another
// repo that the firehose sent earlier: a reply before its parent is judged an invalid reply
// (invalidReplyRoot, for good), and then sends none of its reply notifications. Ours applies
// events in firehose order. These differences are the stock's race, not a difference in
// semantics; everything else the bench reports as a table difference.
import pg from 'pg'
import { PG_URL } from '../harness/env.ts'
import type { TableDiff } from '../harness/indexer.ts'

type Row = Record<string, unknown>

export interface RaceReport {
  rows: number
  describe(): string
}

export async function classifyStockRaces(
  stock: string,
  ours: string,
  diffs: TableDiff[],
): Promise<{ races: RaceReport; unexplained: TableDiff[] }> {
  const client = new pg.Client({ connectionString: PG_URL })
  await client.connect()
  const explained = new Map<string, number>()
  const note = (what: string) => explained.set(what, (explained.get(what) ?? 0) + 1)
  try {
    // Replies the stock marked invalid whose parent and root are both indexed now, in both
    // schemas, and which ours found valid: the parent arrived after the reply in the stock.
    const { rows } = await client.query<{ uri: string }>(`
      select s.uri from "${stock}".post s
      join "${ours}".post o on o.uri = s.uri
      where s."invalidReplyRoot" is true and o."invalidReplyRoot" is not true
        and exists (select 1 from "${stock}".post p where p.uri = s."replyParent")
        and exists (select 1 from "${stock}".post r where r.uri = s."replyRoot")`)
    const raced = new Set(rows.map((r) => r.uri))
    const unexplained: TableDiff[] = []
    for (const d of diffs) {
      const keep = (side: 'stock' | 'ours') => (line: string) => {
        const r = JSON.parse(line) as Row
        if (d.table === 'post' && raced.has(String(r.uri))) {
          note(`post rows (invalidReplyRoot on the stock side only)`)
          return false
        }
        if (
          d.table === 'notification' &&
          side === 'ours' &&
          r.reason === 'reply' &&
          raced.has(String(r.recordUri))
        ) {
          note('reply notifications the raced replies did not send')
          return false
        }
        return true
      }
      const left = {
        ...d,
        onlyStock: d.onlyStock.filter(keep('stock')),
        onlyOurs: d.onlyOurs.filter(keep('ours')),
      }
      if (left.onlyStock.length || left.onlyOurs.length) unexplained.push(left)
    }
    const total = [...explained.values()].reduce((a, b) => a + b, 0)
    return {
      races: {
        rows: total,
        describe: () =>
          `${raced.size} replies indexed before their parent: ` +
          [...explained].map(([what, n]) => `${n} ${what}`).join(', '),
      },
      unexplained,
    }
  } finally {
    await client.end()
  }
}

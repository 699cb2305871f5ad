// The committed-change feed (what the graph, fan-out timelines and a community's membership
// follow): replaying it into a plain model ends equal to the follow, list_item and feed_item
// tables, across creates, deletes, duplicates, promotions and account deletion.
import type { Change } from '@openplane/ingest'
import { describe, expect, it } from 'vitest'
import { compareIndexers } from '../harness/compare-indexers.ts'
import { playScenario } from '../harness/scenario.ts'

describe('committed changes', () => {
  const follows = new Map<string, string>()
  const feedItems = new Map<string, { postUri: string }>()
  const listItems = new Map<string, string>()
  const apply = (changes: Change[]) => {
    for (const c of changes) {
      if (c.table === 'follow') {
        if (c.op === 'insert') follows.set(c.row.uri, `${c.row.creator} ${c.row.subjectDid}`)
        else follows.delete(c.row.uri)
      } else if (c.table === 'list_item') {
        if (c.op === 'insert') listItems.set(c.row.uri, `${c.row.listUri} ${c.row.subjectDid}`)
        else listItems.delete(c.row.uri)
      } else if (c.op === 'insert') {
        feedItems.set(c.row.uri, { postUri: c.row.postUri })
      } else {
        feedItems.delete(c.row.uri)
      }
    }
  }
  const run = compareIndexers(async (net, ours) => {
    ours.writer.onCommitted(apply)
    return playScenario(net.network, net.sc)
  })

  it('replays to the follow table', async () => {
    const rows = await run()
      .ours.db.db.selectFrom('follow')
      .select(['uri', 'creator', 'subjectDid'])
      .execute()
    expect(new Map(rows.map((r) => [r.uri, `${r.creator} ${r.subjectDid}`]))).toEqual(follows)
    expect(follows.size).toBeGreaterThan(5)
  })

  it('replays to the list_item table', async () => {
    const rows = await run()
      .ours.db.db.selectFrom('list_item')
      .select(['uri', 'listUri', 'subjectDid'])
      .execute()
    expect(new Map(rows.map((r) => [r.uri, `${r.listUri} ${r.subjectDid}`]))).toEqual(listItems)
    expect(listItems.size).toBeGreaterThan(1)
  })

  it('replays to the feed_item table', async () => {
    const rows = await run().ours.db.db.selectFrom('feed_item').select(['uri', 'postUri']).execute()
    expect(new Map(rows.map((r) => [r.uri, { postUri: r.postUri }]))).toEqual(feedItems)
    expect(feedItems.size).toBeGreaterThan(5)
  })
})

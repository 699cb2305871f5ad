// Opening the graph at start: from the snapshot a clean shutdown left when it matches where the
// indexer resumes (no follow change can be missing), otherwise from the follow table.
import type { Db } from '@openplane/db'
import { Graph } from '@openplane/graph'
import { childLogger } from '@openplane/telemetry'
import { collectLoadGarbage } from './load-garbage.ts'

const log = childLogger('graph')

export async function openGraph(db: Db): Promise<{ graph: Graph; from: 'snapshot' | 'postgres' }> {
  const started = Date.now()
  const cursors = await db.db.selectFrom('openplane_cursor').select(['source', 'seq']).execute()
  const restored = await Graph.loadSnapshot(db).catch((err: unknown) => {
    log.warn({ err }, 'graph snapshot unreadable; loading from the follow table')
    return undefined
  })
  // One source only: a snapshot carries one position.
  const [only] = cursors
  if (restored && cursors.length === 1 && only && restored.snapshot.cursor === Number(only.seq)) {
    const gc = collectLoadGarbage()
    log.info(
      { edges: restored.graph.edgeCount, ms: Date.now() - started, ...gc },
      'graph from snapshot',
    )
    return { graph: restored.graph, from: 'snapshot' }
  }
  const { graph } = await Graph.loadFromPostgres(db, { ids: restored?.graph.ids })
  const gc = collectLoadGarbage()
  log.info(
    { edges: graph.edgeCount, ms: Date.now() - started, ...gc },
    'graph from the follow table',
  )
  return { graph, from: 'postgres' }
}

/** Stores the graph at `cursor` when exactly one source has been indexed (see openGraph). */
export async function snapshotGraph(
  db: Db,
  graph: Graph,
  applied: ReadonlyMap<string, number>,
): Promise<boolean> {
  if (applied.size !== 1) return false
  const [cursor] = applied.values()
  const meta = await graph.snapshot(db, cursor!)
  log.info({ cursor, edges: meta.edgeCount, bytes: meta.bytes }, 'graph snapshot stored')
  return true
}

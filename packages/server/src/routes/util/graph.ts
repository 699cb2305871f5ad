// Which path answered a graph-backed rpc: the in-memory graph, or Postgres alone (no graph in
// this process, or not loaded yet). Operators and tests read it to know the fast path serves.
import { counter } from '@openplane/telemetry'
import type { FollowGraph, RouteContext } from '../context.ts'

const graphReads = counter(
  'openplane_graph_reads_total',
  'Graph-backed rpcs by the path that answered which follows exist (graph, postgres)',
  ['rpc', 'path'],
)

/** The graph for this call, counted by the path it means. */
export function graphFor(ctx: RouteContext, rpc: string): FollowGraph | undefined {
  const graph = ctx.graph
  graphReads.inc({ rpc, path: graph ? 'graph' : 'postgres' })
  return graph
}

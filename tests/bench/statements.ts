// Statements sent to Postgres by every pg client in this process (the stock's and ours), for
// benches that report statements per unit of work.
import { createRequire } from 'node:module'

export function countStatements(): { count: () => number } {
  let n = 0
  const seen = new Set<unknown>()
  const from = [import.meta.resolve('@atproto/bsky'), import.meta.resolve('@openplane/db')]
  for (const base of from) {
    const pg = createRequire(base)('pg') as { Client: { prototype: { query: unknown } } }
    const proto = pg.Client.prototype
    if (seen.has(proto)) continue
    seen.add(proto)
    const original = proto.query as (...args: unknown[]) => unknown
    proto.query = function (this: unknown, ...args: unknown[]) {
      n++
      return original.apply(this, args)
    }
  }
  return { count: () => n }
}

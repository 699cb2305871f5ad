// Shared by the route differential tests: ask the stock dataplane and ours the same thing and
// expect the same answer (or both to refuse).
import type { JsonValue } from '@bufbuild/protobuf'
import { expect } from 'vitest'
import type { DataplaneClient } from '../harness/stock-network.ts'

type Answer = { toJson(): JsonValue }
type Rpc<K extends keyof DataplaneClient> = (
  req: Parameters<DataplaneClient[K]>[0],
) => Promise<Answer>

export interface Differential {
  /** Both answers as JSON, asserted equal; returns ours. */
  same<K extends keyof DataplaneClient>(
    method: K,
    req: Parameters<DataplaneClient[K]>[0],
  ): Promise<JsonValue>
  /** Both refuse the request. */
  bothReject<K extends keyof DataplaneClient>(
    method: K,
    req: Parameters<DataplaneClient[K]>[0],
  ): Promise<void>
}

export function differential(ours: DataplaneClient, stock: DataplaneClient): Differential {
  const call = <K extends keyof DataplaneClient>(
    client: DataplaneClient,
    method: K,
    req: Parameters<DataplaneClient[K]>[0],
  ) => (client[method].bind(client) as unknown as Rpc<K>)(req)
  return {
    async same(method, req) {
      const [a, b] = await Promise.all([call(ours, method, req), call(stock, method, req)])
      const json = a.toJson()
      expect(json, `${String(method)} ${JSON.stringify(req)}`).toEqual(b.toJson())
      return json
    },
    async bothReject(method, req) {
      await expect(call(ours, method, req)).rejects.toThrow()
      await expect(call(stock, method, req)).rejects.toThrow()
    },
  }
}

/** Walks a paginated rpc to its end on both dataplanes, comparing every page. */
export async function walkPages<K extends keyof DataplaneClient>(
  diff: Differential,
  method: K,
  req: Parameters<DataplaneClient[K]>[0] & { cursor?: string },
  maxPages = 50,
): Promise<JsonValue[]> {
  const pages: JsonValue[] = []
  let cursor: string | undefined
  for (let i = 0; i < maxPages; i++) {
    const json = await diff.same(method, { ...req, cursor })
    pages.push(json)
    const next = (json as { cursor?: string }).cursor
    if (!next) return pages
    cursor = next
  }
  throw new Error(`${String(method)} did not finish in ${maxPages} pages`)
}

// Differential assertions for route tests: call the same rpc on our dataplane and the stock's
// (both reading one schema) and require the same answer, page by page.
import { Code, ConnectError } from '@connectrpc/connect'
import { expect } from 'vitest'
import type { DataplaneClient } from '../harness/stock-network.ts'

interface Message {
  toJson(): unknown
}

interface Paged extends Message {
  cursor: string
}

export type Call<T> = (client: DataplaneClient) => Promise<T>

export interface Differ {
  /** Both answer the call the same way; returns our answer. */
  same<T extends Message>(label: string, call: Call<T>): Promise<T>
  /** Pages through both in lockstep, comparing every page; returns our pages. */
  walk<T extends Paged>(
    label: string,
    call: (client: DataplaneClient, cursor: string) => Promise<T>,
  ): Promise<T[]>
  /** Both reject; ours with `code`. (The stock throws untyped errors for bad input.) */
  bothReject(label: string, call: Call<unknown>, code: Code): Promise<void>
}

const MAX_PAGES = 200

export function differ(ours: DataplaneClient, stock: DataplaneClient): Differ {
  const same = async <T extends Message>(label: string, call: Call<T>): Promise<T> => {
    const [a, b] = await Promise.all([call(ours), call(stock)])
    expect(a.toJson(), label).toEqual(b.toJson())
    return a
  }
  return {
    same,
    async walk(label, call) {
      const pages = []
      let cursor = ''
      for (let i = 0; i < MAX_PAGES; i++) {
        const page = await same(`${label} page ${i} cursor=${cursor}`, (c) => call(c, cursor))
        pages.push(page)
        if (!page.cursor) return pages
        cursor = page.cursor
      }
      throw new Error(`${label}: more than ${MAX_PAGES} pages`)
    },
    async bothReject(label, call, code) {
      const [a, b] = await Promise.allSettled([call(ours), call(stock)])
      expect(a.status, `${label}: ours`).toBe('rejected')
      expect(b.status, `${label}: stock`).toBe('rejected')
      if (a.status === 'rejected') {
        expect(ConnectError.from(a.reason).code, `${label}: our code`).toBe(code)
      }
    },
  }
}

/** Limits the pagination walks use: single rows, small pages, and the AppView's default. */
export const WALK_LIMITS = [1, 2, 5, 50] as const

/** The JSON of a message, for comparing a subset of fields. */
export const json = (m: Message): Record<string, unknown> => m.toJson() as Record<string, unknown>

/** The DID type the SeedClient takes. */
export type Did = `did:${string}:${string}`

/** Picks named users' DIDs for seeding, failing loudly on a name that was never created. */
export function didsOf<K extends string>(
  dids: Record<string, string>,
  ...names: K[]
): Record<K, Did> {
  const out = {} as Record<K, Did>
  for (const name of names) {
    const did = dids[name]
    if (!did?.startsWith('did:')) throw new Error(`no user ${name}`)
    out[name] = did as Did
  }
  return out
}

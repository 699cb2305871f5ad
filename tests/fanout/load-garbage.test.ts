// The full collection after a graph load: it must free garbage that young-generation
// collections promoted (as the load's row pages are), and leave no global `gc` behind.
import { describe, expect, it } from 'vitest'
import { collectLoadGarbage } from '../../packages/fanout/src/load-garbage.ts'

describe('collectLoadGarbage', () => {
  it('frees promoted garbage and exposes no gc', async () => {
    // About 60 MB of rows kept across several turns, as a load's pages are, so that minor
    // collections promote them; then dropped.
    let pages: { creator: string; subject: string }[][] = []
    for (let p = 0; p < 20; p++) {
      pages.push(
        Array.from({ length: 25_000 }, (_, i) => ({
          creator: `did:plc:${p}-${i}-creator`.padEnd(32, 'x'),
          subject: `did:plc:${p}-${i}-subject`.padEnd(32, 'y'),
        })),
      )
      await new Promise((resolve) => setImmediate(resolve))
    }
    expect(pages.flat().length).toBe(500_000)
    pages = []
    const { gcMs, freedMb } = collectLoadGarbage()
    expect(freedMb).toBeGreaterThan(30)
    expect(gcMs).toBeGreaterThanOrEqual(0)
    expect((globalThis as { gc?: unknown }).gc).toBeUndefined()
    // A second call reuses the collector it obtained.
    expect(collectLoadGarbage().freedMb).toBeLessThan(30)
  })
})

// The fuzzer inside a vitest `describe`: started once for the block, closed after it.
import { afterAll, beforeAll, expect } from 'vitest'
import { Fuzzer, type CheckOptions } from './run.ts'
import type { FuzzEvent } from './sequence.ts'

export function useFuzzer(): {
  fuzzer: () => Fuzzer
  /** Asserts that ours ends equal to the stock on this sequence at every given batch size. */
  expectSameAsStock: (events: FuzzEvent[], opts: CheckOptions) => Promise<void>
} {
  let fuzzer: Fuzzer | undefined
  beforeAll(async () => {
    fuzzer = await Fuzzer.start()
  })
  afterAll(async () => {
    await fuzzer?.close()
  })
  return {
    fuzzer: () => fuzzer!,
    async expectSameAsStock(events, opts) {
      const diffs = await fuzzer!.check(events, opts)
      expect(diffs.map((d) => `batch size ${d.batchSize}, ${d.kind}: ${d.detail}`)).toEqual([])
    },
  }
}

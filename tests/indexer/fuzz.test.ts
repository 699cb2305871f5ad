// The indexer fuzzer, bounded for CI: 200 fixed seeds, sequences of 5 to 30 events, each played
// to the stock indexer and to ours at batch size 1, a middle size and one batch, then compared
// table by table (counters against the stock's rows recounted), graph and timelines included.
// A failure prints the shrunk sequence as a regression test. Longer runs: pnpm fuzz:indexer.
import { describe, expect, it } from 'vitest'
import { runCampaign } from '../harness/fuzz/campaign.ts'
import { useFuzzer } from '../harness/fuzz/vitest.ts'

const SEEDS = Array.from({ length: 200 }, (_, i) => i + 1)

describe('indexer fuzzer', () => {
  const { fuzzer } = useFuzzer()

  it(
    'ends equal to the stock on 200 random sequences at every batch size',
    async () => {
      const result = await runCampaign(fuzzer(), {
        seeds: SEEDS,
        minLength: 5,
        maxLength: 30,
        shrinkLimit: 2,
        shrinkMs: 60_000,
      })
      expect(result.sequences).toBe(SEEDS.length)
      expect(result.ops).toBeGreaterThan(SEEDS.length * 5)
      expect(result.failures.map((f) => f.script)).toEqual([])
    },
    15 * 60_000,
  )
})

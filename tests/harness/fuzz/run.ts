// One fuzzer: the world server, the stock indexer and ours, reused across sequences (schemas
// are cleared, not re-migrated). `check` plays a sequence to the stock, then to ours at each
// batch size, and returns every difference.
//
// The world (handles, hosting) is set per segment of the sequence (sequence.ts: segmentsOf)
// for both indexers, and a batch of ours never spans two segments. Where the world changes
// inside a batch, the network itself races the indexer (which state a lookup sees depends on
// when it runs), for the stock as for us: that is not what the fuzzer judges.
import { compareGraph, compareTables, compareTimelines, type Difference } from './compare.ts'
import { encode, type EncodedSequence } from './frames.ts'
import { OurIndexerUnderTest } from './ours.ts'
import { closeFuzzPool } from './schema.ts'
import type { FuzzEvent } from './sequence.ts'
import { StockIndexer } from './stock.ts'
import { startWorld, type WorldServer } from './world.ts'

export interface CheckOptions {
  /** Batch sizes for ours; a size past a segment's length means "the whole segment". */
  batchSizes: number[]
  /** Followers that make an author a celebrity (merged on read instead of fanned out). */
  celebrityFollowers?: number
}

export interface BatchDifference extends Difference {
  batchSize: number
}

export class Fuzzer {
  private seq = 1
  readonly world: WorldServer
  readonly stock: StockIndexer
  readonly ours: OurIndexerUnderTest

  private constructor(world: WorldServer, stock: StockIndexer, ours: OurIndexerUnderTest) {
    this.world = world
    this.stock = stock
    this.ours = ours
  }

  static async start(): Promise<Fuzzer> {
    const world = await startWorld()
    const stock = await StockIndexer.start(world.url)
    const ours = await OurIndexerUnderTest.start(world)
    return new Fuzzer(world, stock, ours)
  }

  async check(events: FuzzEvent[], opts: CheckOptions): Promise<BatchDifference[]> {
    const enc = await encode(events, this.seq)
    this.seq += events.length
    await this.playStock(enc)
    const out: BatchDifference[] = []
    for (const batchSize of opts.batchSizes) {
      const run = await this.ours.play(enc, this.world, {
        batchSize,
        celebrityFollowers: opts.celebrityFollowers ?? Infinity,
      })
      const diffs: Difference[] = [
        ...(run.inexact
          ? [
              {
                kind: 'counter' as const,
                detail:
                  `counters differ from their rows after event ${run.inexact.afterEvent}:\n  ` +
                  run.inexact.lines.join('\n  '),
              },
            ]
          : []),
        ...(await compareTables(this.stock.schema, this.ours.schema)),
        ...(await compareGraph(this.ours.schema, run)),
        ...(await compareTimelines(this.stock.client, this.stock.schema, run)),
      ]
      out.push(...diffs.map((d) => ({ ...d, batchSize })))
    }
    return out
  }

  private async playStock(enc: EncodedSequence): Promise<void> {
    await this.stock.reset()
    for (const { start, end, world } of enc.segments) {
      this.world.set(world)
      await this.stock.play(enc.frames.slice(start, end))
    }
  }

  async close(): Promise<void> {
    await this.stock.close()
    await this.ours.close()
    await this.world.close()
    await closeFuzzPool()
  }
}

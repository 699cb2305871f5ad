// Authors whose followers are merged in at read time instead of receiving fan-out writes. Kept as
// a bitmap of actor ids so "which of my follows are celebrities" is one intersection.
import { RoaringBitmap32, type Graph } from '@openplane/graph'
import { celebrityCount } from './metrics.ts'

export class Celebrities {
  readonly bitmap = new RoaringBitmap32()
  /** Changes with the bitmap: the graph keeps readers' followed celebrities while it holds. */
  #version = 0
  readonly #graph: Graph
  readonly threshold: number

  /** `threshold`: followers at which an author becomes one (Infinity: never). */
  constructor(graph: Graph, threshold: number) {
    this.#graph = graph
    this.threshold = threshold
    this.recount()
  }

  /** Finds them all again (after the graph was reloaded). */
  recount(): void {
    this.#version++
    this.bitmap.clear()
    if (Number.isFinite(this.threshold)) {
      const graph = this.#graph
      for (let id = 1; id <= graph.ids.highWater; id++) {
        if (graph.followerCount(id) >= this.threshold) this.bitmap.add(id)
      }
    }
    celebrityCount.set(this.bitmap.size)
  }

  has(did: string): boolean {
    const id = this.#graph.ids.id(did)
    return id !== undefined && this.bitmap.has(id)
  }

  /** Re-checks an author after its follower count changed: 'joined', 'left' or undefined. */
  update(did: string): 'joined' | 'left' | undefined {
    const id = this.#graph.ids.id(did)
    if (id === undefined) return undefined
    const now = this.#graph.followerCount(id) >= this.threshold
    if (now === this.bitmap.has(id)) return undefined
    this.#version++
    if (now) this.bitmap.add(id)
    else this.bitmap.remove(id)
    celebrityCount.set(this.bitmap.size)
    return now ? 'joined' : 'left'
  }

  /** The celebrities `reader` follows (shared between reads: not to be changed). */
  followedBy(reader: string): readonly string[] {
    if (this.bitmap.size === 0) return []
    return this.#graph.followingDidsIn(reader, this.bitmap, this.#version)
  }

  dids(): string[] {
    return this.#graph.didsOf(this.bitmap)
  }
}

// Counts made per record on a hot path, added to their counter in bulk. A counter's own `inc`
// hashes its labels into a key on every call, and the writer counts every op and event it
// applies: at thousands a second that, with the closure and label object made for each, cost
// the writer's thread more than some of the work it counted. A tally hands out one increment
// function per set of label values, made once; the counts reach the counter when `flushTallies`
// runs (the writer calls it once a batch is delivered) or when the registry is read.
import type { Counter } from 'prom-client'

interface Entry {
  counter: Counter<string>
  labels: Record<string, string>
  n: number
  /** Adds one (the function handed out). */
  add: () => void
}

/** Entries counted since the last flush. */
let dirty: Entry[] = []

/** Adds every tally's counts to its counter. */
export function flushTallies(): void {
  if (!dirty.length) return
  const entries = dirty
  dirty = []
  for (const e of entries) {
    e.counter.inc(e.labels, e.n)
    e.n = 0
  }
}

type Node = Map<string, Node | Entry>

export class Tally<L extends string> {
  private readonly counter: Counter<L>
  private readonly names: readonly L[]
  private readonly root: Node = new Map()

  constructor(counter: Counter<L>, names: readonly L[]) {
    // A counter without labels needs no tally: its `inc` hashes nothing.
    if (!names.length) throw new Error('a tally needs at least one label')
    this.counter = counter
    this.names = names
  }

  /** The function that counts one for these label values, in the order of the names given. */
  of(...values: string[]): () => void {
    if (values.length !== this.names.length) {
      throw new Error(`a tally of ${this.names.join(', ')} needs ${this.names.length} values`)
    }
    let node = this.root
    for (let i = 0; i < values.length - 1; i++) {
      let next = node.get(values[i]!) as Node | undefined
      if (!next) node.set(values[i]!, (next = new Map()))
      node = next
    }
    const last = values[values.length - 1]!
    let entry = node.get(last) as Entry | undefined
    if (!entry) {
      const labels: Record<string, string> = {}
      this.names.forEach((name, i) => (labels[name] = values[i]!))
      const e: Entry = {
        counter: this.counter as Counter<string>,
        labels,
        n: 0,
        add: () => {
          if (e.n++ === 0) dirty.push(e)
        },
      }
      node.set(last, (entry = e))
    }
    return entry.add
  }
}

// Reads asked for in the same turn of the event loop, run together. The AppView asks for a
// page's hydration all at once: the viewer's likes, reposts, bookmarks and thread mutes on the
// page's posts, and the labels on its posts and on its authors, each as an rpc of its own. Each
// was a Postgres statement of its own, and for these small reads the statement itself (a socket
// write, a round trip, a backend woken) is most of the cost. Requests wait until the I/O the
// turn read has been handled (setImmediate), then each group of requests runs once and every
// request gets its own answer. Nothing is kept between turns: a batch reads what is committed
// when it runs, as each request alone would.
import { counter } from '@openplane/telemetry'

const batched = counter(
  'openplane_dataplane_batched_reads_total',
  'Reads answered by a statement shared with other reads of the same turn, by batch',
  ['batch'],
)
const statements = counter(
  'openplane_dataplane_batch_statements_total',
  'Statements run for batched reads, by batch (reads answered minus these is what batching saved)',
  ['batch'],
)

interface Waiting<T, R> {
  item: T
  resolve: (answer: R) => void
  reject: (err: unknown) => void
}

/**
 * Items added under the same key in one turn are answered by one call of `run`, which returns
 * an answer for each item, in order.
 */
export class TurnBatch<T, R> {
  readonly #groups = new Map<string, Waiting<T, R>[]>()
  #scheduled = false
  readonly #name: string
  readonly #run: (items: T[]) => Promise<R[]>

  constructor(name: string, run: (items: T[]) => Promise<R[]>) {
    this.#name = name
    this.#run = run
  }

  add(key: string, item: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      const group = this.#groups.get(key)
      if (group) group.push({ item, resolve, reject })
      else this.#groups.set(key, [{ item, resolve, reject }])
      if (!this.#scheduled) {
        this.#scheduled = true
        setImmediate(() => this.#flush())
      }
    })
  }

  #flush(): void {
    this.#scheduled = false
    const groups = [...this.#groups.values()]
    this.#groups.clear()
    for (const group of groups) void this.#answer(group)
  }

  async #answer(group: Waiting<T, R>[]): Promise<void> {
    statements.inc({ batch: this.#name })
    batched.inc({ batch: this.#name }, group.length)
    try {
      const answers = await this.#run(group.map((waiting) => waiting.item))
      group.forEach((waiting, i) => waiting.resolve(answers[i] as R))
    } catch (err) {
      for (const waiting of group) waiting.reject(err)
    }
  }
}

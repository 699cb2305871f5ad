// One writer for the whole backfill, many repos to a transaction. Most repos hold a handful of
// records: written one transaction each, the writer's fixed cost per transaction (planning,
// a dozen statements, the commit) would bound a backfill to a few dozen repos a second. Repos
// that are ready queue here; while one transaction is written the next fills, and each chunk's
// promise settles when the transaction holding it commits (or finally fails). The repos a
// transaction finishes are marked done in it, in one statement.
import type { RepoChunk, Writer } from '@openplane/ingest'
import { childLogger } from '@openplane/telemetry'
import { markDone, type DoneRepo } from './repos.ts'

const log = childLogger('backfill')

interface Queued {
  chunk: RepoChunk
  /** Set on a repo's last chunk. */
  done: DoneRepo | undefined
  ops: number
  resolve: () => void
  reject: (err: unknown) => void
}

/** What the committer needs of the writer. */
export type RepoWrites = Pick<Writer, 'applyRepos'>

export class Committer {
  private readonly writer: RepoWrites
  /** Record ops per transaction at most (a chunk is never split). */
  private readonly maxOps: number
  private readonly queue: Queued[] = []
  private running = false

  constructor(writer: RepoWrites, maxOps: number) {
    this.writer = writer
    this.maxOps = maxOps
  }

  /** Resolves once the chunk is committed; `done`: its repo is marked done with it. */
  write(chunk: RepoChunk, done?: DoneRepo): Promise<void> {
    const ops = chunk.events.reduce((n, e) => n + (e.type === 'commit' ? e.ops.length : 1), 0)
    return new Promise((resolve, reject) => {
      this.queue.push({ chunk, done, ops, resolve, reject })
      if (!this.running) void this.run()
    })
  }

  private async run(): Promise<void> {
    this.running = true
    try {
      // The group after the one being written, fixed when that one is planned: the writer plans
      // it meanwhile, and the plan is used only for exactly that group.
      let following = 0
      const next = () => {
        following = this.groupSize()
        return this.queue.slice(0, following).map((q) => q.chunk)
      }
      while (this.queue.length) {
        const take = this.queue.splice(0, following || this.groupSize())
        following = 0
        try {
          const done = take.flatMap((q) => (q.done ? [q.done] : []))
          await this.retrying(
            take.map((q) => q.chunk),
            done,
            next,
          )
          for (const q of take) q.resolve()
        } catch (err) {
          for (const q of take) q.reject(err)
        }
      }
    } finally {
      this.running = false
    }
  }

  /** How many queued chunks, from the head, make the next transaction. */
  private groupSize(): number {
    let n = 0
    let ops = 0
    while (n < this.queue.length && (!n || ops + this.queue[n]!.ops <= this.maxOps)) {
      ops += this.queue[n]!.ops
      n++
    }
    return n
  }

  /** A transaction Postgres refused as a whole is tried again (the writer settles a lost COMMIT). */
  private async retrying(
    chunks: RepoChunk[],
    done: DoneRepo[],
    next: () => RepoChunk[],
  ): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.writer.applyRepos(chunks, (tx) => markDone(tx, done), next)
        return
      } catch (err) {
        if (attempt >= 5) throw err
        log.warn({ err, repos: chunks.length, attempt }, 'backfill write failed; retrying')
        await new Promise((r) => setTimeout(r, 1000 * attempt))
      }
    }
  }
}

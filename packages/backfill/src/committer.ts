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

export class Committer {
  private readonly writer: Writer
  /** Record ops per transaction at most (a chunk is never split). */
  private readonly maxOps: number
  private readonly queue: Queued[] = []
  private running = false

  constructor(writer: Writer, maxOps: number) {
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
      while (this.queue.length) {
        const take: Queued[] = []
        let ops = 0
        while (this.queue.length && (!take.length || ops + this.queue[0]!.ops <= this.maxOps)) {
          const q = this.queue.shift()!
          take.push(q)
          ops += q.ops
        }
        try {
          const done = take.flatMap((q) => (q.done ? [q.done] : []))
          await this.retrying(
            take.map((q) => q.chunk),
            done,
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

  /** A transaction Postgres refused as a whole is tried again (the writer settles a lost COMMIT). */
  private async retrying(chunks: RepoChunk[], done: DoneRepo[]): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.writer.applyRepos(chunks, (tx) => markDone(tx, done))
        return
      } catch (err) {
        if (attempt >= 5) throw err
        log.warn({ err, repos: chunks.length, attempt }, 'backfill write failed; retrying')
        await new Promise((r) => setTimeout(r, 1000 * attempt))
      }
    }
  }
}

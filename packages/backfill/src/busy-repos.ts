// The repos a backfill has taken and not let go. Taking more reads a page of pending repos from
// Postgres while jobs run; a job that finishes during that read can be in the page as pending
// still (read before its last write committed) though no longer taken, and would be fetched
// again. So a repo let go while a read of the queue is under way counts as taken for that read.
export class BusyRepos {
  private readonly taken = new Set<string>()
  /** What was let go during each read of the queue in progress. */
  private readonly reads = new Set<Set<string>>()

  get size(): number {
    return this.taken.size
  }

  add(did: string): void {
    this.taken.add(did)
  }

  has(did: string): boolean {
    return this.taken.has(did)
  }

  /** The repo is done, given up or left for later. */
  release(did: string): void {
    this.taken.delete(did)
    for (const released of this.reads) released.add(did)
  }

  /**
   * Reads the queue (`read`, given what to pass over): its answer, and a check of whether a
   * repo is taken that also counts those let go while it read.
   */
  async whileReading<T>(
    read: (busy: Pick<BusyRepos, 'size' | 'has'>) => Promise<T>,
  ): Promise<{ found: T; busy: (did: string) => boolean }> {
    const released = new Set<string>()
    this.reads.add(released)
    try {
      const found = await read(this)
      return { found, busy: (did) => this.taken.has(did) || released.has(did) }
    } finally {
      this.reads.delete(released)
    }
  }
}

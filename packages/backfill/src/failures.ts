// Why a repo's backfill stops: errors the worker tells apart from a fetch's or a CAR's.

/** A repo that cannot be backfilled now, with the host that served it when one did. */
export class RepoFailed extends Error {
  readonly host: string | undefined
  constructor(message: string, host: string | undefined) {
    super(message)
    this.host = host
  }
}

/** A repo's fetch given up because its held live events passed a bound (repo-gate.ts). */
export class HeldPastBound extends Error {
  constructor() {
    super('live events held while fetching passed the bound')
  }
}

export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}

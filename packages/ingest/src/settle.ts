// A batch whose COMMIT went unanswered (the connection died after it was sent) may or may not
// have committed. Postgres is asked, on another connection, by the transaction id the batch
// recorded last; while it cannot tell, the writer keeps the attempt and retries later, never
// guessing.
import { sql, type Kysely } from 'kysely'
import type { DatabaseSchema } from '@openplane/db'

/** How long to wait for a transaction that is still open to end before giving up for now. */
const SETTLE_TRIES = 20
const SETTLE_WAIT_MS = 100

/**
 * Whether the transaction `xid` committed. Throws while Postgres cannot say (unreachable, or the
 * transaction still open after a while).
 */
export async function committed(db: Kysely<DatabaseSchema>, xid: string): Promise<boolean> {
  for (let tries = 1; ; tries++) {
    const { rows } = await sql<{ status: string | null }>`
      select txid_status(${xid}::bigint) as status`.execute(db)
    const status = rows[0]?.status ?? null
    if (status === 'committed') return true
    if (status === 'aborted') return false
    // In progress: the server has not noticed the lost connection yet, or is still committing.
    if (status !== 'in progress' || tries >= SETTLE_TRIES) {
      throw new Error(`outcome of batch transaction ${xid} unknown: ${status ?? 'no status'}`)
    }
    await new Promise((resolve) => setTimeout(resolve, SETTLE_WAIT_MS))
  }
}

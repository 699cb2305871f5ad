// One process writes a database's index at a time: batches are planned on what is committed,
// so two writers (a `start` indexing and a `backfill` beside it) would plan over each other's
// rows. The writer holds a Postgres advisory lock for its life, on a connection of its own.
import { sql } from 'kysely'
import type { Db } from '@openplane/db'

export interface WriterLock {
  release(): Promise<void>
}

/**
 * Takes the writer lock of `db`'s schema: waits for it (`wait`), or returns undefined at once
 * when another process holds it. The embedded database is one process's alone: no lock.
 */
export async function takeWriterLock(
  db: Db,
  opts: { wait: boolean; embedded: boolean },
): Promise<WriterLock | undefined> {
  if (opts.embedded) return { release: async () => {} }
  const key = sql`hashtext(${`openplane-writer:${db.schema}`})`
  let release!: () => void
  const released = new Promise<void>((resolve) => (release = resolve))
  let answer!: (held: boolean) => void
  const got = new Promise<boolean>((resolve) => (answer = resolve))
  const session = db.db
    .connection()
    .execute(async (conn) => {
      if (opts.wait) await sql`select pg_advisory_lock(${key})`.execute(conn)
      else {
        const { rows } = await sql<{
          ok: boolean
        }>`select pg_try_advisory_lock(${key}) as ok`.execute(conn)
        if (!rows[0]?.ok) return answer(false)
      }
      answer(true)
      await released
      await sql`select pg_advisory_unlock(${key})`.execute(conn)
    })
    .catch((err: unknown) => {
      answer(false)
      throw err
    })
  if (!(await got)) {
    await session
    return undefined
  }
  return {
    async release() {
      release()
      await session.catch(() => {})
    },
  }
}

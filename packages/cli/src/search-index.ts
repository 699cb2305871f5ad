// The post search index, built by the indexing process in the background when search is
// full-text: on its own connection (a build takes hours on a large database, and must not hold
// one of the writer's), concurrently (writes and reads go on), logged when it starts and ends.
// A stop cancels a build in progress; the next start drops what it left and builds again.
import { sql } from 'kysely'
import { buildPostSearchIndex, createPgDb, postSearchIndexState, type Db } from '@openplane/db'
import { childLogger } from '@openplane/telemetry'
import type { Config } from './config.ts'

const log = childLogger('search-index')

export interface SearchIndexBuild {
  stop(): Promise<void>
}

export function buildSearchIndexInBackground(config: Config, db: Db): SearchIndexBuild {
  // The embedded Postgres has one connection: the build shares it.
  const own = config.postgres
    ? createPgDb({ url: config.postgres.url, schema: config.schema, poolSize: 1 })
    : undefined
  const on = own ?? db
  let pid: number | undefined
  let stopping = false
  const done = (async () => {
    if ((await postSearchIndexState(on)) === 'valid') return
    const started = performance.now()
    if (own) {
      const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(on.db)
      pid = rows[0]?.pid
    }
    // A stop that came before the build could be cancelled: none begins.
    if (stopping) return
    log.info('building the post search index (concurrently: indexing and reads go on)')
    const outcome = await buildPostSearchIndex(on, { concurrently: own !== undefined })
    if (outcome === 'elsewhere') {
      log.info('another process is building the post search index')
      return
    }
    const seconds = Math.round((performance.now() - started) / 1000)
    log.info({ seconds }, 'post search index built')
  })().catch((err: unknown) => {
    if (stopping) return
    // Searches still answer, without the index: slowly. The next start tries again.
    log.error({ err }, 'building the post search index failed')
  })
  return {
    async stop() {
      stopping = true
      if (pid !== undefined) {
        await sql`select pg_cancel_backend(${pid})`.execute(db.db).catch(() => undefined)
      }
      await done
      await own?.close()
    },
  }
}

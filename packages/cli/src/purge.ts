// `openplane purge`: in a community deployment, removes what is indexed of accounts outside the
// community (members removed from its lists, accounts no member follows any more). They are
// queued in the backfill state table and purged by whichever process holds the writer: this one,
// or a running `openplane start`.
import { parseArgs } from 'node:util'
import { Backfill, BACKFILL_DEFAULTS, RepoTable } from '@openplane/backfill'
import { Community } from '@openplane/community'
import { createIdentity } from '@openplane/identity'
import { Writer, writerDeps } from '@openplane/ingest'
import { logger } from '@openplane/telemetry'
import { UsageError } from './backfill.ts'
import type { Config } from './config.ts'
import { openDatabase } from './database.ts'
import { takeWriterLock } from './writer-lock.ts'

export const PURGE_USAGE = `usage: openplane purge [--dry-run]
  Removes the rows of accounts outside the community (DATAPLANE_COMMUNITY_DIDS, _DIDS_FILE,
  _LISTS, _FOLLOWS): their records, what they counted, their notifications.
  --dry-run   print how many accounts would be purged, and some of them, and exit`

export async function purgeCommand(config: Config, argv: string[]): Promise<number> {
  let dryRun: boolean | undefined
  try {
    dryRun = parseArgs({ args: argv, options: { 'dry-run': { type: 'boolean' } } }).values[
      'dry-run'
    ]
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err))
  }
  if (!config.community) {
    throw new UsageError(
      'purge removes accounts outside a community: set DATAPLANE_COMMUNITY_DIDS, _DIDS_FILE or _LISTS',
    )
  }
  const db = await openDatabase(config)
  try {
    const community = await Community.open(db.db, config.community, false)
    const outsiders = await community.outsiders()
    console.log(`${outsiders.length} accounts outside the community (${community.size()} in it)`)
    for (const did of outsiders.slice(0, 10)) console.log(`  ${did}`)
    if (dryRun || !outsiders.length) return 0
    const repos = new RepoTable(db.db)
    await repos.enqueuePurge(outsiders)
    const lock = await takeWriterLock(db, { wait: false, embedded: !config.postgres })
    if (!lock) {
      logger.info('a running `openplane start` writes this database: its worker purges them')
      for (;;) {
        const { purge } = await repos.counts()
        if (purge === 0) break
        logger.info({ purge }, 'accounts still to purge')
        await new Promise((r) => setTimeout(r, 2000))
      }
    } else {
      try {
        const identity = createIdentity({ plcUrl: config.plcUrl })
        const writer = new Writer(db.db, writerDeps(identity), {
          scope: community,
          transactions: db.transactions,
          keptRows: config.keptPosts,
          keptRepos: config.keptRepos,
        })
        const backfill = new Backfill({
          ...BACKFILL_DEFAULTS,
          db: db.db,
          writer,
          didDocs: identity.idResolver.did,
          scope: community,
        })
        await backfill.purgeQueued()
      } finally {
        await lock.release()
      }
    }
    console.log(`purged ${outsiders.length} accounts`)
    return 0
  } finally {
    await db.close()
  }
}

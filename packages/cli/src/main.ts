#!/usr/bin/env node
// openplane: start | appview | migrate | backfill | purge | rpcs
import { Service } from '@openplane/proto'
import { implementedMethods } from '@openplane/server'
import { logger } from '@openplane/telemetry'
import { APPVIEW_USAGE, appviewCommand } from './appview.ts'
import { BACKFILL_USAGE, backfillCommand, UsageError } from './backfill.ts'
import { ConfigError, readConfig } from './config.ts'
import { openDatabase } from './database.ts'
import { PURGE_USAGE, purgeCommand } from './purge.ts'
import { superviseProcesses } from './processes.ts'
import { stopOnSignals } from './signals.ts'
import { start } from './start.ts'

const USAGE = `usage: openplane <command>
  start     run the rpc server and the firehose indexer (configuration from env, see README)
  appview   start, plus the stock AppView in front of it in the same process (openplane appview --help)
  migrate   create or adopt the schema and apply migrations, then exit
  backfill  fetch whole repos from their PDSes and index them (openplane backfill --help)
  purge     remove the rows of accounts outside the community (openplane purge --help)
  rpcs      print which bsky.Service rpcs are implemented`

async function main(argv: string[]): Promise<number> {
  const cmd = argv[0] ?? 'start'
  if (cmd === 'rpcs') return printRpcs(argv.includes('--missing'))
  if (cmd === 'help' || cmd === '--help') {
    console.log(USAGE)
    return 0
  }
  const commands = { backfill: backfillCommand, purge: purgeCommand, appview: appviewCommand }
  const usages = { backfill: BACKFILL_USAGE, purge: PURGE_USAGE, appview: APPVIEW_USAGE }
  const named = Object.hasOwn(commands, cmd) ? (cmd as keyof typeof commands) : undefined
  const usage = named && usages[named]
  if (usage && (argv.includes('--help') || argv.includes('-h'))) {
    console.log(usage)
    return 0
  }
  let config
  try {
    config = readConfig()
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err
    console.error(`configuration error: ${err.message}`)
    return 2
  }
  if (cmd === 'migrate') {
    const db = await openDatabase(config)
    await db.close()
    logger.info({ schema: config.schema }, 'schema is current')
    return 0
  }
  if (named) {
    try {
      return await commands[named](config, argv.slice(1))
    } catch (err) {
      // A mistyped option, an unreadable DID list, a bad AppView setting: say so, not a stack.
      if (err instanceof ConfigError) {
        console.error(`configuration error: ${err.message}`)
        return 2
      }
      if (!(err instanceof UsageError)) throw err
      console.error(`${err.message}\n${usage ?? ''}`)
      return 2
    }
  }
  if (cmd === 'start' && config.processes > 1) {
    const supervisor = superviseProcesses(config, [process.argv[1]!])
    stopOnSignals(logger, () => supervisor.stop())
    return -1
  }
  if (cmd === 'start') {
    const running = await start(config)
    stopOnSignals(logger, async () => {
      await running.stop()
      return 0
    })
    return -1
  }
  console.error(USAGE)
  return 2
}

function printRpcs(missingOnly: boolean): number {
  const implemented = new Set(implementedMethods())
  const all = Object.entries(Service.methods)
  for (const [local, m] of all) {
    const ok = implemented.has(local)
    if (!missingOnly || !ok) console.log(`${ok ? 'implemented  ' : 'unimplemented'}  ${m.name}`)
  }
  console.log(`${implemented.size}/${all.length} rpcs implemented`)
  return 0
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exit(code)
  },
  (err: unknown) => {
    logger.fatal({ err }, 'fatal')
    console.error(err)
    process.exit(1)
  },
)

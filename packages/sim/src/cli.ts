#!/usr/bin/env node
// openplane-sim (`pnpm sim`): generate and load userbases, generate scenarios, check files.
import { once } from 'node:events'
import { createWriteStream } from 'node:fs'
import { parseArgs } from 'node:util'
import { checkFile, readScenarioParams, readUserbaseParams, writeScenario } from './files.ts'
import { generateScenarios } from './generate.ts'
import { formatLoadReport, loadUserbase } from './load.ts'
import { totalFollows } from './powerlaw.ts'
import { progressReporter } from './progress.ts'
import { formatStats, measureUserbase } from './stats.ts'
import { ParamError } from './validate.ts'

const USAGE = `usage: pnpm sim <command>
  generate-userbase <params.json> [--out <file>|-]
      generate the follow graph and print its in-/out-degree p50/p99/max and the rate;
      --out also writes every follow as "follower_id<TAB>subject_id" lines ("-" = stdout)
  load-userbase <params.json> --schema <name>
      create <name> in the stock dataplane schema at DB_POSTGRES_URL and COPY the userbase in
      (actors, profiles, follows, existing posts, records, profile_agg); prints rows/s and bytes
  generate-scenario <params.json>... --out <file>
      posts / sessions / follows scenario from generator parameters (several files merge)
  check <file>...
      validate userbase, scenario-parameter, scenario and plan files`

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: { out: { type: 'string' }, schema: { type: 'string' }, help: { type: 'boolean' } },
  })
  if (!cmd || cmd === 'help' || cmd === '--help' || values.help) {
    console.log(USAGE)
    return cmd ? 0 : 2
  }
  const first = positionals[0]
  if (!first) return usage(`${cmd} needs a file`)

  if (cmd === 'generate-userbase') {
    const params = await readUserbaseParams(first)
    const out = values.out === undefined ? undefined : openOut(values.out)
    const progress = progressReporter()
    const total = totalFollows(params.num_users, params.follower_density)
    const stats = await measureUserbase(params, {
      onSubject: out && ((subject, followers) => writePairs(out, subject, followers)),
      onFollows: (done) => progress('generate', done, total),
    })
    progress('generate', stats.follows, stats.follows)
    progress.finish()
    if (out && out !== process.stdout) {
      out.end()
      await once(out, 'finish')
    }
    // Stats go to stderr when the pairs take stdout.
    ;(out === process.stdout ? console.error : console.log)(formatStats(stats))
    return 0
  }

  if (cmd === 'load-userbase') {
    const url = process.env.DB_POSTGRES_URL
    if (!url) return usage('load-userbase needs DB_POSTGRES_URL (a postgres:// URL)')
    if (!values.schema) return usage('load-userbase needs --schema <name>')
    const params = await readUserbaseParams(first)
    const progress = progressReporter()
    const report = await loadUserbase(params, { url, schema: values.schema, progress })
    progress.finish()
    console.log(formatLoadReport(report))
    return 0
  }

  if (cmd === 'generate-scenario') {
    if (!values.out) return usage('generate-scenario needs --out <file>')
    const params = await Promise.all(positionals.map(readScenarioParams))
    const scenario = generateScenarios(params)
    await writeScenario(scenario, values.out)
    const counts = Object.entries(scenario).map(([k, v]: [string, unknown[]]) => `${v.length} ${k}`)
    console.error(`wrote ${values.out}: ${counts.join(', ')}`)
    return 0
  }

  if (cmd === 'check') {
    for (const file of positionals) console.log(`${file}: ok (${await checkFile(file)})`)
    return 0
  }
  return usage(`unknown command ${cmd}`)
}

function openOut(file: string): NodeJS.WritableStream {
  return file === '-' ? process.stdout : createWriteStream(file)
}

/** "follower<TAB>subject" lines of one subject, in writes of ~64 KiB, waiting on backpressure. */
async function writePairs(
  out: NodeJS.WritableStream,
  subject: number,
  followers: Int32Array,
): Promise<void> {
  let text = ''
  for (let i = 0; i < followers.length; i++) {
    text += `${followers[i]}\t${subject}\n`
    if (text.length >= 1 << 16 || i === followers.length - 1) {
      if (!out.write(text)) await once(out, 'drain')
      text = ''
    }
  }
}

function usage(message: string): number {
  console.error(`${message}\n\n${USAGE}`)
  return 2
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (err instanceof ParamError) {
      console.error(`error: ${err.message}`)
      process.exit(2)
    }
    console.error(err)
    process.exit(1)
  },
)

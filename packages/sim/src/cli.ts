#!/usr/bin/env node
// openplane-sim (`pnpm sim`): generate and load userbases, generate scenarios, check files; run
// simulation plans against dataplanes, compare two, render reports.
import { once } from 'node:events'
import { createWriteStream } from 'node:fs'
import { writeFile } from 'node:fs/promises'
import path from 'node:path'
import { parseArgs } from 'node:util'
import {
  checkFile,
  readPlan,
  readScenarioParams,
  readUserbaseParams,
  writeScenario,
} from './files.ts'
import { CORPUS_COMMANDS, CORPUS_USAGE, corpusCommand } from './corpus/cli.ts'
import { generateScenarios } from './generate.ts'
import { formatLoadReport, loadUserbase } from './load.ts'
import type { PlanEntry } from './params.ts'
import { totalFollows } from './powerlaw.ts'
import { progressReporter } from './progress.ts'
import { renderReport } from './report/html.ts'
import { formatSummaryTable, summarize } from './report/summary.ts'
import { compareRuns, type CompareTarget } from './run/compare.ts'
import { readRunData, REPORT_FILE } from './run/data.ts'
import { createSink, RUN_FLAGS, runOptions, startDelay } from './run-flags.ts'
import { readReplay, startRun, type RunOptions } from './run/runner.ts'
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
      validate userbase, scenario-parameter, scenario and plan files
  run <plan.json> --dataplane <url> [run options]
      run a simulation plan: posts and follows go to a local firehose (+ PLC stub) that the
      dataplane's indexer subscribes to; sessions call GetTimeline on the dataplane; writes
      plan.json (the effective plan), run.json and report.html to the run directory
  replay <run-dir> --dataplane <url> [run options]
      run a run directory's exported plan again, with its speed, interval and end
  compare <plan.json> --stock <url> --ours <url> [--labels stock,openplane] [run options]
      the same plan against both dataplanes, one after the other (a fresh firehose each);
      writes <out>/<label>/ per run and <out>/compare.html, prints the comparison table
  report <run-dir> [<run-dir>] [--out <file>] [--title <text>]
      re-render the report of a run (or compare two) from run.json
${CORPUS_USAGE}

run options:
  --out <dir>               run directory (default .data/sim-runs/<time>-<label>)
  --label <name>            run name in metrics and reports (default "run")
  --speed <x>               plan time runs x times faster (default 1)
  --duration <t>            stop at this plan offset (ms, or 90s / 5m / 2h); default: plan end
  --interval <t>            plan time between a session's GetTimeline requests (default 10s)
  --limit <n>               GetTimeline limit (default 50)
  --timeout <t>             wall time before a request fails (default 10s)
  --late <t>                wall time after which an event or tick counts late (default 50ms)
  --max-in-flight <n>       emitter backpressure limit: events beyond are dropped (default 1000)
  --http-version <1.1|2>    gRPC transport to the dataplane (default: detected)
  --control-port <n>        control endpoint + /metrics on 127.0.0.1 (default 9465; 0 = any)
  --firehose-port <n>       port of the local firehose (default 0 = any; fix it for indexers)
  --plc-port <n>            port of the PLC stub (default 0 = any)
  --userbase <params.json>  the loaded userbase: ids, handles, keys seed and, for firehose
                            lag, who follows whom
  --lag-every <n>           probe firehose lag on every nth created post (default 10, 0 = off;
                            needs --userbase)
  --lag-timeout <t>         give up on a probed post after this wall time (default 30s)
  --start-delay <t>         wait this long once the firehose is up before starting the plan, so
                            indexers (re)connect first (default 0)
  --appview <url>           also call app.bsky.feed.getTimeline on an AppView each tick; auth:
                            SIM_APPVIEW_ADMIN_PASSWORD (or --appview-admin-password) = one of
                            the AppView's admin passwords, sent as Basic admin auth with an
                            appview-as-did header per user`

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv
  if (cmd && CORPUS_COMMANDS.has(cmd) && !rest.includes('--help')) return corpusCommand(cmd, rest)
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: {
      out: { type: 'string' },
      schema: { type: 'string' },
      help: { type: 'boolean' },
      ...RUN_FLAGS,
    },
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

  if (cmd === 'run' || cmd === 'replay') {
    if (!values.dataplane) return usage(`${cmd} needs --dataplane <url>`)
    let plan: PlanEntry[]
    let bounds: Partial<RunOptions> = {}
    if (cmd === 'replay') {
      const replay = await readReplay(first)
      plan = replay.plan
      bounds = {
        speed: replay.speed,
        sessionIntervalMs: replay.sessionIntervalMs,
        timelineLimit: replay.timelineLimit,
        ...(replay.maxDurationMs === undefined ? {} : { maxDurationMs: replay.maxDurationMs }),
      }
    } else {
      plan = await readPlan(first)
    }
    const common = await runOptions(values)
    const label = values.label ?? (cmd === 'replay' ? 'replay' : 'run')
    const outDir = values.out ?? defaultOutDir(label)
    const sink = await createSink(values, common.userbase)
    await startDelay(values, sink)
    const progress = progressReporter()
    let result
    try {
      const run = await startRun({
        ...bounds,
        ...common.options,
        plan,
        sink,
        label,
        outDir,
        dataplaneUrl: values.dataplane,
        progress,
      })
      console.error(
        `run ${label}: ${plan.length} plan entries -> ${outDir}\n` +
          `  firehose ${sink.url}  plc ${sink.plcUrl}\n` +
          (run.controlUrl
            ? `  control ${run.controlUrl}  (POST /scenarios {"scenario_name","path"}, ` +
              `GET /plan, POST /stop, GET /metrics)\n`
            : ''),
      )
      stopOnSignal(() => run.stop())
      result = await run.done
    } finally {
      progress.finish()
      await sink.close()
    }
    console.log(formatSummaryTable([summarize(result.data)]))
    console.log(`\nplan   ${result.planPath}\nreport ${result.reportPath}`)
    return 0
  }

  if (cmd === 'compare') {
    if (!values.stock || !values.ours) return usage('compare needs --stock <url> and --ours <url>')
    const [stockLabel = 'stock', oursLabel = 'openplane'] = (values.labels ?? '').split(',')
    const plan = await readPlan(first)
    const common = await runOptions(values)
    const outDir = values.out ?? defaultOutDir(`${stockLabel}-vs-${oursLabel}`)
    const targets: [CompareTarget, CompareTarget] = [
      { label: stockLabel || 'stock', dataplaneUrl: values.stock },
      { label: oursLabel || 'openplane', dataplaneUrl: values.ours },
    ]
    for (const t of targets) {
      if (common.options.appview) t.appview = common.options.appview
      if (common.options.httpVersion) t.httpVersion = common.options.httpVersion
    }
    const progress = progressReporter()
    const result = await compareRuns({
      ...common.options,
      plan,
      targets,
      outDir,
      progress,
      sinkFor: async (target) => {
        const sink = await createSink(values, common.userbase)
        console.error(`${target.label}: firehose ${sink.url}  plc ${sink.plcUrl}`)
        await startDelay(values, sink)
        return sink
      },
      onRunStart: (target, i) => {
        progress.finish()
        console.error(`run ${i + 1}/2: ${target.label} (${target.dataplaneUrl})`)
      },
    })
    progress.finish()
    console.log(result.table)
    console.log(`\nreport ${result.reportPath}`)
    return 0
  }

  if (cmd === 'report') {
    if (positionals.length > 2) return usage('report takes one run directory, or two to compare')
    const runs = await Promise.all(positionals.map((dir) => readRunData(dir)))
    const out = values.out ?? path.join(first, REPORT_FILE)
    await writeFile(out, renderReport(runs, values.title ? { title: values.title } : {}))
    console.log(formatSummaryTable(runs.map(summarize)))
    console.log(`\nreport ${out}`)
    return 0
  }
  return usage(`unknown command ${cmd}`)
}

function defaultOutDir(label: string): string {
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15)
  return path.join('.data', 'sim-runs', `${stamp}-${label.replace(/[^A-Za-z0-9._-]+/g, '_')}`)
}

/** First SIGINT/SIGTERM stops the run (the report is still written); a second one exits. */
function stopOnSignal(stop: () => void): void {
  let stopping = false
  const onSignal = (): void => {
    if (stopping) process.exit(130)
    stopping = true
    console.error('\nstopping: dispatching up to now, draining, writing the report...')
    stop()
  }
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)
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
    // A flag node's parseArgs refuses (unknown, or a value missing) is the caller's mistake too.
    const code = (err as { code?: unknown }).code
    if (
      err instanceof ParamError ||
      (typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS'))
    ) {
      console.error(`error: ${(err as Error).message}`)
      process.exit(2)
    }
    console.error(err)
    process.exit(1)
  },
)

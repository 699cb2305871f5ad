#!/usr/bin/env node
// openplane-sim (`pnpm sim`): generate and load userbases, generate scenarios, check files; run
// simulation plans against dataplanes, compare two, render reports.
import { once } from 'node:events'
import { createWriteStream } from 'node:fs'
import { writeFile } from 'node:fs/promises'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
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
import type { PlanEntry, UserbaseParams } from './params.ts'
import { totalFollows } from './powerlaw.ts'
import { progressReporter } from './progress.ts'
import { renderReport } from './report/html.ts'
import { formatSummaryTable, summarize } from './report/summary.ts'
import type { AppviewOptions, HttpVersion } from './run/client.ts'
import { compareRuns, type CompareTarget } from './run/compare.ts'
import { readRunData, REPORT_FILE } from './run/data.ts'
import { userbaseFollowerOf } from './run/followers.ts'
import type { LagOptions } from './run/lag.ts'
import { readReplay, startRun, type RunOptions } from './run/runner.ts'
import type { ClosableSink } from './run/sink.ts'
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

const RUN_FLAGS = {
  dataplane: { type: 'string' },
  stock: { type: 'string' },
  ours: { type: 'string' },
  labels: { type: 'string' },
  label: { type: 'string' },
  title: { type: 'string' },
  speed: { type: 'string' },
  duration: { type: 'string' },
  interval: { type: 'string' },
  limit: { type: 'string' },
  timeout: { type: 'string' },
  late: { type: 'string' },
  'max-in-flight': { type: 'string' },
  'http-version': { type: 'string' },
  'control-port': { type: 'string' },
  'firehose-port': { type: 'string' },
  'plc-port': { type: 'string' },
  userbase: { type: 'string' },
  'lag-every': { type: 'string' },
  'lag-timeout': { type: 'string' },
  'start-delay': { type: 'string' },
  appview: { type: 'string' },
  'appview-admin-password': { type: 'string' },
} as const

type Flags = Partial<Record<keyof typeof RUN_FLAGS | 'out', string>>

/** Run options shared by run, replay and compare, from the flags. */
async function runOptions(flags: Flags): Promise<{
  options: Omit<RunOptions, 'plan' | 'sink'>
  userbase?: UserbaseParams
}> {
  const options: Omit<RunOptions, 'plan' | 'sink'> = {
    controlPort: intFlag(flags, 'control-port', 9465, 0),
  }
  if (flags.speed !== undefined) {
    const speed = Number(flags.speed)
    if (!(speed > 0) || !Number.isFinite(speed)) {
      throw new ParamError(`--speed must be a positive number, got ${JSON.stringify(flags.speed)}`)
    }
    options.speed = speed
  }
  const duration = durationFlag(flags, 'duration')
  if (duration !== undefined) options.maxDurationMs = duration
  const interval = durationFlag(flags, 'interval')
  if (interval !== undefined) options.sessionIntervalMs = interval
  const timeout = durationFlag(flags, 'timeout')
  if (timeout !== undefined) options.requestTimeoutMs = timeout
  const late = durationFlag(flags, 'late')
  if (late !== undefined) options.lateMs = late
  if (flags.limit !== undefined) options.timelineLimit = intFlag(flags, 'limit', 50, 1)
  if (flags['max-in-flight'] !== undefined) {
    options.maxInFlight = intFlag(flags, 'max-in-flight', 1000, 1)
  }
  const version = flags['http-version']
  if (version !== undefined) {
    if (version !== '1.1' && version !== '2') {
      throw new ParamError(`--http-version must be 1.1 or 2, got ${JSON.stringify(version)}`)
    }
    options.httpVersion = version as HttpVersion
  }
  if (flags.appview) {
    const appview: AppviewOptions = { url: flags.appview }
    const password = flags['appview-admin-password'] ?? process.env.SIM_APPVIEW_ADMIN_PASSWORD
    if (password) appview.adminPassword = password
    else console.error('warning: --appview without an admin password: requests will fail auth')
    options.appview = appview
  }
  let userbase: UserbaseParams | undefined
  if (flags.userbase) userbase = await readUserbaseParams(flags.userbase)
  const lagEvery = intFlag(flags, 'lag-every', 10, 0)
  if (userbase && lagEvery > 0) {
    const lag: LagOptions = { followerOf: userbaseFollowerOf(userbase), sampleEvery: lagEvery }
    const lagTimeout = durationFlag(flags, 'lag-timeout')
    if (lagTimeout !== undefined) lag.timeoutMs = lagTimeout
    options.lag = lag
  }
  return userbase ? { options, userbase } : { options }
}

/** The event sink of the CLI: a local firehose and PLC stub for the simulated users. */
async function createSink(
  flags: Flags,
  userbase: UserbaseParams | undefined,
): Promise<ClosableSink & { url: string; plcUrl: string; close(): Promise<void> }> {
  // Loaded on demand: the other commands do not need the emitter's dependencies.
  const { LocalNetwork } = await import('./emit/index.ts')
  return LocalNetwork.start({
    seed: userbase?.seed ?? 1,
    ...(userbase ? { handleDomain: userbase.handle_domain, users: userbase.num_users } : {}),
    port: intFlag(flags, 'firehose-port', 0, 0),
    plcPort: intFlag(flags, 'plc-port', 0, 0),
  })
}

async function startDelay(flags: Flags, sink: { url: string }): Promise<void> {
  const ms = durationFlag(flags, 'start-delay') ?? 0
  if (ms <= 0) return
  console.error(`firehose ${sink.url} is up; starting the plan in ${ms / 1000} s`)
  await sleep(ms)
}

function intFlag(flags: Flags, name: keyof Flags, fallback: number, min: number): number {
  const raw = flags[name]
  if (raw === undefined) return fallback
  const n = Number(raw)
  if (!Number.isSafeInteger(n) || n < min) {
    throw new ParamError(`--${name} must be an integer >= ${min}, got ${JSON.stringify(raw)}`)
  }
  return n
}

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }

/** A duration flag: milliseconds, or a number with ms / s / m / h. */
function durationFlag(flags: Flags, name: keyof Flags): number | undefined {
  const raw = flags[name]
  if (raw === undefined) return undefined
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(raw.trim())
  if (!m) {
    throw new ParamError(
      `--${name} must be a duration (ms, or with ms/s/m/h), got ${JSON.stringify(raw)}`,
    )
  }
  return Math.round(Number(m[1]) * UNITS[m[2] ?? 'ms']!)
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
    if (err instanceof ParamError) {
      console.error(`error: ${err.message}`)
      process.exit(2)
    }
    console.error(err)
    process.exit(1)
  },
)

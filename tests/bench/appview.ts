// pnpm bench:appview — app.bsky.feed.getTimeline end to end: the stock AppView (configured only
// by env) in front of the stock dataplane, then in front of ours, on the same Postgres data as
// bench:timeline (the toolkit's 100k-user base). Viewers are the base's active users: a PLC stub
// of the toolkit serves their DID documents with keys derived from a seed, so each viewer's
// service token (signed here with that key) verifies at the AppView like a PDS's would. Prints,
// per side, the sequential p50 and p50/p95/p99 at fixed offered loads, and for ours what one
// page costs the dataplane: rpcs by method and the server time each took (from its metrics).
// Ends with one line:
//   appview: getTimeline p50 stock <ms> ms, openplane <ms> ms; at <n> rps p99 stock <ms> ms, openplane <ms> ms
// Not part of CI.
//
//   BENCH_USERBASE, BENCH_SCHEMA   as bench:timeline (the schema is loaded if empty)
//   BENCH_APPVIEW_RATES            offered loads, req/s (default 5,10,20,40)
//   BENCH_SECONDS                  seconds per load step (default 10)
//   BENCH_SEQUENTIAL               requests of the sequential run (default 300)
//   BENCH_VIEWERS                  viewers drawn from the active users (default 1000; each is
//                                  warmed once per side first, about 0.1 s each)
//   BENCH_ONLY                     stock | ours (default both)
//   BENCH_REDIS                    as bench:timeline
//   BENCH_PROFILE                  a directory: CPU-profile our server over the cost pages
//   BENCH_APPVIEW_LOG              set: the AppView logs warnings (shown if a request fails)
import { mkdirSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { performance } from 'node:perf_hooks'
import { Secp256k1Keypair } from '@atproto/crypto'
import { createServiceJwt } from '@atproto/xrpc-server'
import { readUserbaseParams } from '@openplane/sim'
import pg from 'pg'
import { PG_URL } from '../harness/env.ts'
import { PlcStub, SimKeys } from '../../packages/sim/src/emit/index.ts'
import { freePort, spawnReady, type Child } from '../harness/processes.ts'
import { profileWhile } from './inspector.ts'
import { contextSwitchesByName, cpuByName, minorFaultsByName, processCpu } from './proc.ts'
import { summarise } from './profile-summary.ts'
import { startGenerator, type LoadGenerator, type StepResult } from './load-generator.ts'
import {
  benchReaders,
  benchSchema,
  ensureLoaded,
  benchRedis,
  keptRedis,
  spawnOurs,
  spawnStock,
} from './timeline.ts'

const root = path.resolve(import.meta.dirname, '../..')
const USERBASE = process.env.BENCH_USERBASE ?? 'packages/sim/examples/userbase-100k-with-posts.json'
const RATES = (process.env.BENCH_APPVIEW_RATES ?? '5,10,20,40').split(',').map(Number)
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10)
const SEQUENTIAL = Number(process.env.BENCH_SEQUENTIAL ?? 300)
const VIEWERS = Number(process.env.BENCH_VIEWERS ?? 1000)
const KEY_SEED = 7
const SERVER_DID = 'did:web:appview.bench.invalid'
const MOD_DID = 'did:web:mod.bench.invalid'
const PROFILE_DIR = process.env.BENCH_PROFILE

const log = (...a: unknown[]) => console.log('[bench:appview]', ...a)

/** The stock AppView process on `dataplaneUrl`, resolving DIDs through `plcUrl`. */
async function spawnAppView(
  dataplaneUrl: string,
  httpVersion: '1.1' | '2',
  plcUrl: string,
): Promise<Child> {
  const port = await freePort()
  const key = await Secp256k1Keypair.create({ exportable: true })
  return spawnReady(
    ['tests/harness/appview-process.ts'],
    {
      BSKY_PORT: String(port),
      BSKY_PUBLIC_URL: `http://127.0.0.1:${port}`,
      BSKY_DID_PLC_URL: plcUrl,
      BSKY_SERVER_DID: SERVER_DID,
      BSKY_SERVICE_SIGNING_KEY: Buffer.from(await key.export()).toString('hex'),
      BSKY_DATAPLANE_URLS: dataplaneUrl,
      BSKY_DATAPLANE_HTTP_VERSION: httpVersion,
      // Not used by getTimeline; the AppView requires one.
      BSKY_BSYNC_URL: 'http://127.0.0.1:1',
      MOD_SERVICE_DID: MOD_DID,
      BSKY_LABELS_FROM_ISSUER_DIDS: MOD_DID,
      BSKY_DISABLE_SSRF_PROTECTION: 'true',
      NODE_ENV: 'production',
      LOG_ENABLED: process.env.BENCH_APPVIEW_LOG ? 'true' : 'false',
      LOG_LEVEL: 'warn',
    },
    `http://127.0.0.1:${port}`,
    '/xrpc/_health',
  )
}

/** getTimeline pages through an AppView, each viewer with its own service token. */
function appViewGenerator(
  appview: string,
  viewers: string[],
  tokens: Map<string, string>,
): LoadGenerator {
  return startGenerator({ kind: 'appview', url: appview, tokens: [...tokens] }, viewers)
}

/** rpc count and summed seconds per method, from a dataplane's metrics. */
async function rpcTotals(url: string): Promise<Map<string, { n: number; s: number }>> {
  const text = await (await fetch(`${url}/metrics`)).text()
  const out = new Map<string, { n: number; s: number }>()
  for (const m of text.matchAll(
    /^openplane_rpc_duration_seconds_(count|sum)\{method="(\w+)",code="(\w+)"\} ([\d.e+-]+)$/gm,
  )) {
    const t = out.get(m[2]!) ?? { n: 0, s: 0 }
    if (m[1] === 'count') t.n += Number(m[4])
    else t.s += Number(m[4])
    out.set(m[2]!, t)
  }
  return out
}

interface Side {
  seq: number
  steps: StepResult[]
  /** CPU ms per page over sequential pages: the dataplane process, Postgres, the AppView. */
  cost?: {
    dataplane: number
    postgres: number
    appview: number
    statements: number
    /** Rows Postgres read (returned by scans and fetched by index) and buffers it hit, per page. */
    rows: number
    buffers: number
    /** Context switches of Postgres's processes per page: each wake-up of a backend is one. */
    switches: number
    /** Minor page faults of Postgres's processes per page: a backend maps each shared buffer
     * on its first touch. */
    faults: number
    /** Postgres connections opened over the counted pages: each forks a backend that fills
     * its catalog caches and prepares its statements again. */
    sessions: number
  }
}

const COST_PAGES = 200
/**
 * Pages run after the first read of Postgres's counters and before the CPU is read: that read
 * waits 11 s, longer than a pool with pg's default keeps an idle connection (10 s, the stock's),
 * and the pages after it would otherwise pay for reopening them. Postgres's counters and the rpcs
 * are counted over these pages too (COUNTED_PAGES), the CPU over COST_PAGES only.
 */
const WARM_PAGES = 20
const COUNTED_PAGES = WARM_PAGES + COST_PAGES

/** CPU each part spends per page, over COST_PAGES sequential pages. */
async function pageCost(
  gen: LoadGenerator,
  dataplanePid: number,
  appviewPid: number,
): Promise<NonNullable<Side['cost']>> {
  const at = () => ({
    dataplane: processCpu(dataplanePid),
    postgres: cpuByName('postgres'),
    appview: processCpu(appviewPid),
    switches: contextSwitchesByName('postgres'),
    faults: minorFaultsByName('postgres'),
  })
  const before = await databaseStats()
  await gen.sequential(WARM_PAGES)
  const a = at()
  await gen.sequential(COST_PAGES)
  const b = at()
  const after = await databaseStats()
  const per = (k: 'dataplane' | 'postgres' | 'appview') => ((b[k] - a[k]) * 1000) / COST_PAGES
  return {
    dataplane: per('dataplane'),
    postgres: per('postgres'),
    appview: per('appview'),
    // Less the statement that read the counters the first time.
    statements: (after.xacts - before.xacts - 1) / COUNTED_PAGES,
    rows: (after.rows - before.rows) / COUNTED_PAGES,
    buffers: (after.buffers - before.buffers) / COUNTED_PAGES,
    switches: (b.switches - a.switches) / COST_PAGES,
    faults: (b.faults - a.faults) / COST_PAGES,
    // Less the connection that read the counters the first time.
    sessions: after.sessions - before.sessions - 1,
  }
}

/**
 * The database's counters: transactions finished, rows read, buffers hit. Each read of a
 * dataplane runs as a transaction of its own, so over sequential pages (nothing else using the
 * database) the difference in transactions is the statements they ran. An idle backend that reported less than a second ago reports again
 * only after ten seconds idle: wait that out before reading.
 */
async function databaseStats(): Promise<{
  xacts: number
  rows: number
  buffers: number
  sessions: number
}> {
  await new Promise((resolve) => setTimeout(resolve, 11_000))
  const client = new pg.Client({ connectionString: PG_URL })
  await client.connect()
  try {
    const { rows } = await client.query<{
      xacts: string
      rows: string
      buffers: string
      sessions: string
    }>(
      `select xact_commit + xact_rollback as xacts, tup_returned + tup_fetched as rows,
        blks_hit + blks_read as buffers, sessions
        from pg_stat_database where datname = current_database()`,
    )
    const row = rows[0]
    return {
      xacts: Number(row?.xacts),
      rows: Number(row?.rows),
      buffers: Number(row?.buffers),
      sessions: Number(row?.sessions),
    }
  } finally {
    await client.end()
  }
}

async function measure(name: string, gen: LoadGenerator, viewers: number): Promise<Side> {
  // Warm: every viewer once (identity caches, Postgres pages, our timelines).
  const t0 = performance.now()
  await gen.all()
  log(`${name}: warmed ${viewers} viewers in ${((performance.now() - t0) / 1000).toFixed(1)} s`)
  const seq = await gen.sequential(SEQUENTIAL)
  log(`${name}: sequential p50 ${seq.toFixed(2)} ms`)
  const steps: StepResult[] = []
  for (const rate of RATES) {
    const r = await gen.step(rate, SECONDS)
    steps.push(r)
    log(
      `${name} offered ${rate}/s: achieved ${r.achieved.toFixed(1)}/s, p50 ${r.p50.toFixed(2)} ms, ` +
        `p95 ${r.p95.toFixed(2)} ms, p99 ${r.p99.toFixed(2)} ms, errors ${r.errors}, dropped ${r.dropped}`,
    )
    if (r.p99 > 2000 || r.achieved < 0.8 * rate) break
  }
  return { seq, steps }
}

async function main(): Promise<void> {
  const params = await readUserbaseParams(path.resolve(root, USERBASE))
  const schema = process.env.BENCH_SCHEMA ?? benchSchema(params.num_users)
  await ensureLoaded(schema)
  const active = params.max_active_user_id
  const count = Math.min(active, VIEWERS)
  const viewers = benchReaders(active, count)
  const keys = new SimKeys({ seed: KEY_SEED })
  const plc = await PlcStub.start({
    host: '127.0.0.1',
    port: 0,
    keys,
    users: params.num_users,
    handleDomain: params.handle_domain ?? 'sim.test',
    pdsUrl: 'http://127.0.0.1:1',
  })
  // One token per viewer, valid for the whole run (the AppView keeps no replay list).
  const exp = Math.floor(Date.now() / 1000) + 3 * 3600
  const tokens = new Map<string, string>()
  for (const viewer of viewers) {
    const id = plc.idOf(viewer)!
    tokens.set(
      viewer,
      await createServiceJwt({
        iss: viewer,
        aud: SERVER_DID,
        lxm: 'app.bsky.feed.getTimeline',
        exp,
        keypair: keys.keypair(id),
      }),
    )
  }
  log(`${viewers.length} viewers, ${SECONDS} s per step`)
  const sides: Record<string, Side> = {}
  const only = process.env.BENCH_ONLY
  try {
    if (only !== 'ours') {
      const stock = await spawnStock(schema, { PLC_URL: plc.url })
      // The stock dataplane's server speaks HTTP/1.1 only.
      const appview = await spawnAppView(stock.url, '1.1', plc.url)
      try {
        const gen = appViewGenerator(appview.url, viewers, tokens)
        try {
          sides.stock = await measure('stock', gen, viewers.length).catch((err: unknown) => {
            throw new Error(`${String(err)}\nAppView output:\n${appview.output().slice(-6000)}`)
          })
          sides.stock.cost = await pageCost(gen, stock.proc.pid!, appview.proc.pid!)
        } finally {
          await gen.close()
        }
      } finally {
        await appview.stop()
        await stock.stop()
      }
    }
    if (only !== 'stock') {
      const keep = process.env.BENCH_REDIS
      const redis = keep ? keptRedis(keep) : await benchRedis()
      const ours = await spawnOurs(schema, redis, `ws://127.0.0.1:${await freePort()}`, true, {
        DATAPLANE_PLC_URL: plc.url,
        DATAPLANE_ALLOW_PRIVATE_NETWORK: 'true',
      })
      const appview = await spawnAppView(ours.child.url, '2', plc.url)
      const gen = appViewGenerator(appview.url, viewers, tokens)
      try {
        sides.openplane = await measure('openplane', gen, viewers.length).catch((err: unknown) => {
          throw new Error(
            `${String(err)}\ndataplane output:\n${ours.child.output().slice(-3000)}\n` +
              `AppView output:\n${appview.output().slice(-6000)}`,
          )
        })
        // What one page costs the dataplane: rpcs and server time by method, and CPU, over
        // sequential pages (profiled when BENCH_PROFILE names a directory).
        const before = await rpcTotals(ours.child.url)
        const pages = COUNTED_PAGES
        const costRun = () => pageCost(gen, ours.child.proc.pid!, appview.proc.pid!)
        if (PROFILE_DIR) {
          const { result, profile } = await profileWhile(ours.inspectPort, costRun)
          sides.openplane.cost = result
          mkdirSync(PROFILE_DIR, { recursive: true })
          const file = path.join(PROFILE_DIR, 'appview-pages-openplane.cpuprofile')
          writeFileSync(file, JSON.stringify(profile))
          log(`profile of ours over ${pages} pages:\n${summarise(file, 30, pages)}`)
        } else {
          sides.openplane.cost = await costRun()
        }
        const after = await rpcTotals(ours.child.url)
        const rows = [...after]
          .map(([method, t]) => {
            const b = before.get(method) ?? { n: 0, s: 0 }
            return { method, calls: (t.n - b.n) / pages, ms: ((t.s - b.s) * 1000) / pages }
          })
          .filter((r) => r.calls > 0)
          .sort((a, b) => b.ms - a.ms)
        console.log(`\none getTimeline page on openplane (${pages} sequential pages):`)
        console.log('| rpc | calls per page | server ms per page |')
        console.log('| --- | ---: | ---: |')
        for (const r of rows)
          console.log(`| ${r.method} | ${r.calls.toFixed(2)} | ${r.ms.toFixed(2)} |`)
        const total = rows.reduce((a, r) => ({ calls: a.calls + r.calls, ms: a.ms + r.ms }), {
          calls: 0,
          ms: 0,
        })
        console.log(`| all | ${total.calls.toFixed(2)} | ${total.ms.toFixed(2)} |`)
        console.log(
          '(server ms: each rpc from request to answer; the AppView sends most of them at once, so\n' +
            ' they overlap and include waiting on one another in this process and in Postgres)',
        )
      } finally {
        await gen.close()
        await appview.stop()
        await ours.child.stop()
        await redis.dispose()
      }
    }
  } finally {
    await plc.close()
  }
  const names = Object.keys(sides)
  for (const n of names) {
    const c = sides[n]!.cost
    if (c) {
      console.log(
        `${n}: CPU per page ${(c.dataplane + c.postgres + c.appview).toFixed(2)} ms: dataplane ` +
          `${c.dataplane.toFixed(2)}, Postgres ${c.postgres.toFixed(2)}, AppView ${c.appview.toFixed(2)}; ` +
          `Postgres statements per page ${c.statements.toFixed(2)}, rows read ${c.rows.toFixed(0)}, ` +
          `buffers ${c.buffers.toFixed(0)}, Postgres context switches ${c.switches.toFixed(1)}, ` +
          `minor faults ${c.faults.toFixed(0)}; connections opened over ${COUNTED_PAGES} pages ${c.sessions}`,
      )
    }
  }
  console.log(
    `\n| offered req/s | ${names.map((n) => `${n} achieved | ${n} p50 / p95 / p99 ms`).join(' | ')} |`,
  )
  console.log(`| ---: | ${names.map(() => '---: | ---:').join(' | ')} |`)
  for (const rate of RATES) {
    const cells = names.map((n) => {
      const r = sides[n]!.steps.find((x) => x.offered === rate)
      return r
        ? `${r.achieved.toFixed(1)} | ${r.p50.toFixed(2)} / ${r.p95.toFixed(2)} / ${r.p99.toFixed(2)}`
        : '— | —'
    })
    console.log(`| ${rate} | ${cells.join(' | ')} |`)
  }
  // The highest load both sides ran.
  const common = RATES.filter((rate) =>
    names.every((n) => sides[n]!.steps.some((x) => x.offered === rate)),
  ).at(-1)
  const p99 = (n: string) => sides[n]?.steps.find((x) => x.offered === common)?.p99 ?? NaN
  console.log(
    `appview: getTimeline p50 stock ${sides.stock?.seq.toFixed(2) ?? 'NaN'} ms, openplane ${sides.openplane?.seq.toFixed(2) ?? 'NaN'} ms; ` +
      `at ${common ?? 'NaN'} rps p99 stock ${p99('stock').toFixed(2)} ms, openplane ${p99('openplane').toFixed(2)} ms`,
  )
}

await main()

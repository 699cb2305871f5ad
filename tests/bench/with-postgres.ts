// Runs a bench against a Postgres of its own, set up as an operator would for a dataplane
// (DATAPLANE_PG_SETTINGS: docs/operations.md), instead of the machine's: a stock install's
// 128 MB of shared buffers and 1 GB of WAL between checkpoints are outgrown by either side's
// index within the default corpus, after which both sides' statements mostly read and evict
// pages through the kernel. Both sides of the bench run on it; the bench, as a child process,
// sees it as OPENPLANE_TEST_PG_URL. The server and its data go when the bench ends.
//
//   node bench/with-postgres.ts [node options] <bench script> [args]
//   BENCH_PG           private (default) or shared: the machine's (OPENPLANE_TEST_PG_URL), as is
//   BENCH_PG_SETTINGS  name=value,… over DATAPLANE_PG_SETTINGS
import { spawn } from 'node:child_process'
import {
  DATAPLANE_PG_SETTINGS,
  parseSettings,
  startPrivatePostgres,
  type PrivatePostgres,
} from '../harness/private-postgres.ts'

const mode = process.env.BENCH_PG ?? 'private'
if (mode !== 'private' && mode !== 'shared') {
  throw new Error(`BENCH_PG must be private or shared, not ${mode}`)
}
const args = process.argv.slice(2)
if (!args.some((a) => a.endsWith('.ts'))) {
  throw new Error('usage: node bench/with-postgres.ts [node options] <bench script> [args]')
}

let server: PrivatePostgres | undefined
const env = { ...process.env }
if (mode === 'private') {
  const settings = {
    ...DATAPLANE_PG_SETTINGS,
    ...parseSettings('BENCH_PG_SETTINGS', process.env.BENCH_PG_SETTINGS),
  }
  server = await startPrivatePostgres({ settings })
  env.OPENPLANE_TEST_PG_URL = server.url
  console.log(
    `[bench] Postgres of its own on port ${server.port}: ` +
      Object.entries(settings)
        .map(([k, v]) => `${k}=${v}`)
        .join(', '),
  )
} else console.log("[bench] the machine's Postgres (BENCH_PG=shared)")

const child = spawn(process.execPath, args, { env, stdio: 'inherit' })
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => child.kill(signal))
}
const code = await new Promise<number>((resolve) =>
  child.on('exit', (c, signal) => resolve(c ?? (signal ? 1 : 0))),
)
await server?.destroy()
process.exit(code)

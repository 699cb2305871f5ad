// Several server processes on one machine (DATAPLANE_PROCESSES): one Node process answers on one
// core, so a machine with more cores runs one per core, each on its own port. The AppView spreads
// its calls over the urls it is given at random, per call, and keeps one HTTP/2 connection per
// url: N ports listed in BSKY_DATAPLANE_URLS use N processes evenly, where one shared port would
// give each AppView's single connection to one process. The first process runs the indexer (when
// configured); the others serve without it, reading the same Postgres, the timelines in Redis and
// a graph kept current from the indexer's change feed. This process only supervises: it starts
// them, restarts one that exits on its own (with backoff), and stops them all on a signal.
import { spawn, type ChildProcess } from 'node:child_process'
import { childLogger } from '@openplane/telemetry'
import type { Config } from './config.ts'

const log = childLogger('processes')

/** Restart delays after an unexpected exit: doubling from 1 s to 30 s; reset after a minute up. */
const FIRST_DELAY_MS = 1000
const MAX_DELAY_MS = 30_000
const STEADY_MS = 60_000

export interface Supervisor {
  /** The rpc urls of the processes, in order: what BSKY_DATAPLANE_URLS should list. */
  urls: string[]
  /** Stops every process (SIGTERM: each drains as a single server does); 0 when all exited cleanly. */
  stop(): Promise<number>
}

/** The environment of process `i` of `n`: its own ports; the indexer in the first only. */
export function processEnv(
  config: Config,
  env: NodeJS.ProcessEnv,
  i: number,
): Record<string, string | undefined> {
  return {
    ...env,
    DATAPLANE_PROCESSES: '1',
    DATAPLANE_PROCESS_INDEX: String(i),
    DATAPLANE_PORT: String(config.port + i),
    ...(config.ops && { DATAPLANE_OPS_PORT: String(config.ops.port + i) }),
    ...(config.subscribe && { DATAPLANE_SUBSCRIBE_PORT: String(config.subscribe.port + i) }),
    DATAPLANE_INDEXER: String(i === 0 && config.indexer),
  }
}

export function superviseProcesses(config: Config, entry: string[]): Supervisor {
  const scheme = config.tls ? 'https' : 'http'
  const urls = Array.from(
    { length: config.processes },
    (_, i) => `${scheme}://${config.host}:${config.port + i}`,
  )
  let stopping = false
  /** Each slot's running process (undefined while a restart waits), and how its last one exited. */
  const slots = urls.map(() => ({
    child: undefined as ChildProcess | undefined,
    exit: Promise.resolve(0),
    restart: undefined as NodeJS.Timeout | undefined,
  }))
  const run = (i: number, delayMs: number): void => {
    const slot = slots[i]!
    const started = Date.now()
    const child = spawn(process.execPath, [...process.execArgv, ...entry, 'start'], {
      env: processEnv(config, process.env, i),
      // The channel tells a process when this one is gone (killed, crashed): it stops too.
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    })
    slot.child = child
    slot.exit = new Promise((resolve) => {
      let ended = false
      const end = (code: number | null, signal: NodeJS.Signals | null) => {
        if (ended) return
        ended = true
        slot.child = undefined
        resolve(code ?? 1)
        if (stopping) return
        const next =
          Date.now() - started > STEADY_MS ? FIRST_DELAY_MS : Math.min(delayMs * 2, MAX_DELAY_MS)
        log.error(
          { process: i, code, signal, restartInMs: next },
          'server process exited; restarting it',
        )
        slot.restart = setTimeout(() => run(i, next), next)
      }
      child.once('exit', end)
      // A process that could not be started at all may never report an exit.
      child.on('error', (err) => {
        log.error({ process: i, err }, 'server process failed')
        if (child.pid === undefined) end(null, null)
      })
    })
  }
  for (let i = 0; i < config.processes; i++) run(i, FIRST_DELAY_MS / 2)
  log.info(
    { processes: config.processes, urls, indexer: config.indexer ? urls[0] : undefined },
    `serving from ${config.processes} processes; list every url in BSKY_DATAPLANE_URLS`,
  )
  return {
    urls,
    async stop() {
      stopping = true
      for (const slot of slots) {
        clearTimeout(slot.restart)
        slot.child?.kill('SIGTERM')
      }
      // A slot waiting to restart has nothing to stop (its crash was logged when it happened).
      const codes = await Promise.all(slots.map((s) => (s.child ? s.exit : 0)))
      return codes.every((c) => c === 0) ? 0 : 1
    },
  }
}

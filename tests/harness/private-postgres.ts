// A Postgres server of a test's own, on loopback, that the test may stop, kill and restart
// without touching the shared one: a real server restart (clients get 57P01 "terminating
// connection due to administrator command", then refused connections, then a fresh server), not
// a simulation. Built from the installed Postgres binaries; as root, the server runs as the
// `postgres` user (Postgres refuses to run as root).
import { execFile } from 'node:child_process'
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir, userInfo } from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { freePort } from './processes.ts'

const run = promisify(execFile)

export interface PrivatePostgres {
  /** postgresql:// URL of its `postgres` database. */
  url: string
  port: number
  /** Stops the server: `fast` ends sessions cleanly, `immediate` is a crash (recovery at start). */
  stop(mode?: 'fast' | 'immediate'): Promise<void>
  start(): Promise<void>
  /** Copies `schema` (definitions and rows) into the Postgres at `targetUrl`, same name. */
  copySchemaTo(schema: string, targetUrl: string): Promise<void>
  /** Stops the server and removes its data directory. */
  destroy(): Promise<void>
}

function binDir(): string {
  const root = '/usr/lib/postgresql'
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : []
  for (const v of versions) {
    const dir = path.join(root, v, 'bin')
    if (existsSync(path.join(dir, 'pg_ctl'))) return dir
  }
  throw new Error(`no Postgres server binaries under ${root}`)
}

/**
 * A Postgres set up as docs/operations.md advises for a dataplane on a machine of this kind
 * (2 cores, 24 GB): the index outgrows the 128 MB of shared buffers and the 1 GB of WAL between
 * checkpoints a stock install starts with within minutes of indexing, and every statement then
 * reads and evicts pages through the kernel and writes full-page images after each checkpoint.
 */
export const DATAPLANE_PG_SETTINGS: Readonly<Record<string, string>> = {
  fsync: 'on',
  shared_buffers: '2GB',
  effective_cache_size: '8GB',
  work_mem: '16MB',
  maintenance_work_mem: '256MB',
  max_wal_size: '4GB',
  checkpoint_timeout: '15min',
}

/** `name=value,…` (an env variable's value) as settings; errors name the variable. */
export function parseSettings(variable: string, value: string | undefined): Record<string, string> {
  const out: Record<string, string> = {}
  for (const kv of (value ?? '').split(',').filter(Boolean)) {
    const at = kv.indexOf('=')
    if (at <= 0) throw new Error(`${variable}: "${kv}" is not name=value`)
    out[kv.slice(0, at)] = kv.slice(at + 1)
  }
  return out
}

export interface PrivatePostgresOptions {
  /**
   * Server settings (`-c name=value`), over the defaults: `fsync=off` (a test's server need not
   * survive a power cut) and `max_connections=200`.
   */
  settings?: Record<string, string>
}

export async function startPrivatePostgres(
  opts: PrivatePostgresOptions = {},
): Promise<PrivatePostgres> {
  const bin = binDir()
  const dir = mkdtempSync(path.join(tmpdir(), 'op-pg-'))
  const data = path.join(dir, 'data')
  const asRoot = userInfo().uid === 0
  if (asRoot) chownSync(dir, Number((await run('id', ['-u', 'postgres'])).stdout.trim()), -1)
  const exec = async (name: string, args: string[]) => {
    const file = path.join(bin, name)
    const { stdout } = asRoot
      ? await run('runuser', ['-u', 'postgres', '--', file, ...args], { cwd: dir })
      : await run(file, args, { cwd: dir })
    return stdout
  }
  await exec('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8'])
  const port = await freePort()
  const settings: Record<string, string> = {
    listen_addresses: '127.0.0.1',
    fsync: 'off',
    max_connections: '200',
    ...opts.settings,
  }
  const options = [
    `-p ${port}`,
    `-k ${dir}`,
    ...Object.entries(settings).map(([k, v]) => `-c ${k}=${v}`),
  ].join(' ')
  const start = () =>
    exec('pg_ctl', ['-D', data, '-o', options, '-l', path.join(dir, 'log'), '-w', 'start']).then(
      () => undefined,
    )
  await start()
  let running = true
  const stop = async (mode: 'fast' | 'immediate' = 'fast') => {
    if (!running) return
    await exec('pg_ctl', ['-D', data, '-m', mode, '-w', 'stop'])
    running = false
  }
  return {
    url: `postgresql://postgres@127.0.0.1:${port}/postgres`,
    port,
    stop,
    async start() {
      if (running) return
      await start()
      running = true
    },
    async copySchemaTo(schema, targetUrl) {
      const dump = path.join(dir, `${schema}.sql`)
      const at = ['-h', '127.0.0.1', '-p', String(port), '-U', 'postgres']
      await exec('pg_dump', [
        ...at,
        '-n',
        schema,
        '--no-owner',
        '--no-privileges',
        '-f',
        dump,
        'postgres',
      ])
      await exec('psql', ['-d', targetUrl, '-q', '-v', 'ON_ERROR_STOP=1', '-f', dump])
    },
    async destroy() {
      await stop('immediate').catch(() => {})
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

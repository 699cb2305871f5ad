// Throwaway redis-server processes on free loopback ports: a single server a test may stop,
// flush or restart, and a Redis Cluster of masters created with `redis-cli --cluster create`.
// Nothing is persisted; each server lives in its own temp directory, removed on stop.
import { execFile, spawn, type ChildProcess } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { freePort } from './processes.ts'

const run = promisify(execFile)
const HOST = '127.0.0.1'

export interface RedisServer {
  host: string
  port: number
  /** redis-cli against this server, e.g. `cli('FLUSHALL')`. */
  cli(...args: string[]): Promise<string>
  /** Stops the process (SIGKILL by default: a crash, not a shutdown). */
  stop(signal?: NodeJS.Signals): Promise<void>
  /** Sends a signal without waiting (SIGSTOP: a hung server; SIGCONT resumes it). */
  signal(signal: NodeJS.Signals): void
  /** Starts it again on the same port, empty. */
  restart(): Promise<void>
  /** Stops it for good and removes its directory. */
  dispose(): Promise<void>
}

export interface RedisCluster {
  nodes: { host: string; port: number }[]
  servers: RedisServer[]
  /** `redis-cli` with cluster-management arguments (`--cluster reshard …`). */
  cli(...args: string[]): Promise<string>
  stop(): Promise<void>
}

const cli = async (port: number, ...args: string[]): Promise<string> =>
  (await run('redis-cli', ['-h', HOST, '-p', String(port), ...args])).stdout.trim()

async function until(what: string, ok: () => Promise<boolean>, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms
  while (!(await ok().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

/** One redis-server; `args` are extra config flags (`['--cluster-enabled', 'yes']`). */
export async function startRedisServer(args: string[] = []): Promise<RedisServer> {
  const port = await freePort()
  const dir = await mkdtemp(path.join(tmpdir(), 'openplane-redis-'))
  let proc: ChildProcess | undefined
  let output = ''

  const launch = async (): Promise<void> => {
    output = ''
    const flags = ['--port', String(port), '--bind', HOST, '--save', '', '--appendonly', 'no']
    proc = spawn('redis-server', [...flags, '--dir', dir, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    proc.stdout!.on('data', (d) => (output += d))
    proc.stderr!.on('data', (d) => (output += d))
    const p = proc
    await until(`redis-server on ${port}`, async () => {
      if (p.exitCode !== null) throw new Error(`redis-server exited:\n${output}`)
      return (await cli(port, 'PING')) === 'PONG'
    }).catch((err: unknown) => {
      throw new Error(`${String(err)}\n${output}`)
    })
  }

  const halt = async (signal: NodeJS.Signals): Promise<void> => {
    const p = proc
    if (!p || p.exitCode !== null || p.signalCode !== null) return
    const exited = new Promise<void>((r) => p.once('exit', () => r()))
    p.kill(signal)
    await exited
  }

  await launch()
  return {
    host: HOST,
    port,
    cli: (...a) => cli(port, ...a),
    stop: (signal = 'SIGKILL') => halt(signal),
    signal: (signal) => void proc?.kill(signal),
    async restart() {
      await halt('SIGKILL')
      await launch()
    },
    async dispose() {
      await halt('SIGKILL')
      await rm(dir, { recursive: true, force: true })
    },
  }
}

/** `masters` cluster-enabled servers joined into one cluster (no replicas), ready for commands. */
export async function startRedisCluster(masters = 3): Promise<RedisCluster> {
  const servers: RedisServer[] = []
  try {
    for (let i = 0; i < masters; i++) {
      const busPort = await freePort()
      servers.push(
        await startRedisServer([
          '--cluster-enabled',
          'yes',
          '--cluster-port',
          String(busPort),
          '--cluster-config-file',
          `nodes-${i}.conf`,
          '--cluster-node-timeout',
          '2000',
        ]),
      )
    }
    const addrs = servers.map((s) => `${s.host}:${s.port}`)
    await run('redis-cli', [
      '--cluster',
      'create',
      ...addrs,
      '--cluster-replicas',
      '0',
      '--cluster-yes',
    ])
    for (const s of servers) {
      await until(`cluster state ok on ${s.port}`, async () =>
        (await s.cli('CLUSTER', 'INFO')).includes('cluster_state:ok'),
      )
    }
  } catch (err) {
    await Promise.all(servers.map((s) => s.dispose()))
    throw err
  }
  return {
    nodes: servers.map((s) => ({ host: s.host, port: s.port })),
    servers,
    cli: async (...args) => (await run('redis-cli', args, { maxBuffer: 64 << 20 })).stdout,
    stop: async () => {
      await Promise.all(servers.map((s) => s.dispose()))
    },
  }
}

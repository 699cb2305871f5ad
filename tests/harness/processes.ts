// Child processes for end-to-end tests: our dataplane through its CLI, and a stock AppView
// configured only by environment variables, as an operator would run them.
import { spawn, type ChildProcess } from 'node:child_process'
import net from 'node:net'
import path from 'node:path'
import type { TestNetwork } from '@atproto/dev-env'

const root = path.resolve(import.meta.dirname, '../..')

export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const s = net.createServer()
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo
      s.close(() => resolve(port))
    })
    s.on('error', reject)
  })

export interface Child {
  proc: ChildProcess
  url: string
  output(): string
  /** The exit code, or the name of the signal that ended the process. */
  stop(signal?: NodeJS.Signals): Promise<number | NodeJS.Signals | null>
}

export async function spawnReady(
  args: string[],
  env: Record<string, string>,
  url: string,
  readyPath: string,
  /** Whether a response means ready (default: a 2xx). */
  isReady: (res: Response) => boolean = (res) => res.ok,
  /** How long it may take; a dataplane loading a large graph takes most of a minute. */
  readyWithinMs = 60_000,
): Promise<Child> {
  const proc = spawn(process.execPath, args, {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  proc.stdout!.on('data', (d) => (out += d))
  proc.stderr!.on('data', (d) => (out += d))
  // A signal's name when one ended it: a crash (SIGSEGV, SIGABRT) reads apart from an unhandled
  // SIGTERM in a failed assertion.
  const exited = new Promise<number | NodeJS.Signals | null>((r) =>
    proc.once('exit', (code, signal) => r(code ?? signal)),
  )
  const deadline = Date.now() + readyWithinMs
  for (;;) {
    if (proc.exitCode !== null)
      throw new Error(`${args.join(' ')} exited ${proc.exitCode}:\n${out}`)
    if (Date.now() > deadline) {
      proc.kill('SIGKILL')
      throw new Error(`${args.join(' ')} did not become ready:\n${out}`)
    }
    const ok = await fetch(url + readyPath).then(
      (r) => isReady(r),
      () => false,
    )
    if (ok) break
    await new Promise((r) => setTimeout(r, 200))
  }
  return {
    proc,
    url,
    output: () => out,
    async stop(signal = 'SIGTERM') {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal)
      return exited
    },
  }
}

export interface DataplaneEnv {
  pgUrl: string
  schema: string
  plcUrl: string
  pdsUrl: string
  port?: number
  extra?: Record<string, string>
  /** The CLI's entry point (default: this checkout's; a test may run another copy's). */
  main?: string
}

/** `openplane start` as its own process, indexing the PDS firehose into `schema`. */
export async function spawnDataplane(opts: DataplaneEnv): Promise<Child> {
  const port = opts.port ?? (await freePort())
  return spawnReady(
    [opts.main ?? 'packages/cli/src/main.ts', 'start'],
    {
      DB_POSTGRES_URL: opts.pgUrl,
      DB_POSTGRES_SCHEMA: opts.schema,
      DATAPLANE_PORT: String(port),
      DATAPLANE_FIREHOSE_URLS: opts.pdsUrl.replace(/^http/, 'ws'),
      DATAPLANE_PLC_URL: opts.plcUrl,
      DATAPLANE_ALLOW_PRIVATE_NETWORK: 'true',
      DATAPLANE_TEST_HANDLE_PDS_URL: opts.pdsUrl,
      DATAPLANE_BATCH_WAIT_MS: '5',
      LOG_LEVEL: process.env.OPENPLANE_TEST_LOG_LEVEL ?? 'warn',
      ...opts.extra,
    },
    `http://127.0.0.1:${port}`,
    '/_health',
  )
}

/**
 * The last seq the dataplane's first source committed, from its health report (-1 while it has
 * none, or does not answer: it may be starting, or just killed).
 */
export async function appliedSeq(dataplaneUrl: string): Promise<number> {
  const res = await fetch(`${dataplaneUrl}/_health`).catch(() => undefined)
  const body = (await res?.json().catch(() => undefined)) as
    { dependencies?: { sources?: { seq?: number }[] } } | undefined
  return body?.dependencies?.sources?.[0]?.seq ?? -1
}

/** Waits until the dataplane has applied every firehose event up to `seq`. */
export async function waitForSeq(dataplaneUrl: string, seq: number): Promise<void> {
  const res = await fetch(`${dataplaneUrl}/_wait?seq=${seq}&timeoutMs=60000`)
  if (!res.ok) throw new Error(`dataplane did not reach seq ${seq}: ${await res.text()}`)
}

export interface AppViewEnv {
  dataplaneUrl: string
  httpVersion: '1.1' | '2'
  plcUrl: string
  pdsUrl: string
  serverDid: string
  bsyncUrl: string
  modServiceDid: string
}

/** A second stock AppView like the dev-env network's, on another dataplane, over HTTP/2. */
export function appViewEnvFor(network: TestNetwork, dataplaneUrl: string): AppViewEnv {
  return {
    dataplaneUrl,
    httpVersion: '2',
    plcUrl: network.plc.url,
    pdsUrl: network.pds.url,
    serverDid: network.bsky.serverDid,
    bsyncUrl: network.bsync.url,
    modServiceDid: network.ozone.ctx.cfg.service.did,
  }
}

/** The dev-env AppView's fixed signing key, so dev-env service tokens verify here too. */
const APPVIEW_KEY = '3f916c70dc69e4c5e83877f013325b11ecac31742e6a42f5c4fb240d0703d9d5'

export async function spawnAppView(opts: AppViewEnv): Promise<Child> {
  const port = await freePort()
  const url = `http://127.0.0.1:${port}`
  return spawnReady(
    ['tests/harness/appview-process.ts'],
    {
      BSKY_PORT: String(port),
      // The dev-env AppView's public URL: image links in views are built from it.
      BSKY_PUBLIC_URL: 'https://bsky.public.url',
      BSKY_DID_PLC_URL: opts.plcUrl,
      BSKY_SERVER_DID: opts.serverDid,
      BSKY_SERVICE_SIGNING_KEY: APPVIEW_KEY,
      BSKY_DATAPLANE_URLS: opts.dataplaneUrl,
      BSKY_DATAPLANE_HTTP_VERSION: opts.httpVersion,
      BSKY_BSYNC_URL: opts.bsyncUrl,
      BSKY_BSYNC_API_KEY: 'bsync-api-key',
      BSKY_BSYNC_HTTP_VERSION: '1.1',
      MOD_SERVICE_DID: opts.modServiceDid,
      BSKY_LABELS_FROM_ISSUER_DIDS: opts.modServiceDid,
      BSKY_ADMIN_PASSWORDS: 'admin-pass',
      BSKY_DISABLE_SSRF_PROTECTION: 'true',
      NODE_ENV: 'production',
      LOG_ENABLED: 'false',
      TEST_PDS_URL: opts.pdsUrl,
    },
    url,
    '/xrpc/_health',
  )
}
